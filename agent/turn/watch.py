"""One watcher for every turn a process runs: stops asked for elsewhere, and heartbeats.

A `/stop` from another process (or a delete of the session) reaches a turn as a flag on
its run record. Polling for it per turn would cost a query per turn twice a second, which
at fifty concurrent turns is a good part of a core; one poll asks about all of them, and
the same loop keeps their heartbeats going.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Callable
from typing import Any
from uuid import UUID

from agent.turn import store
from sessions_app.models import HEARTBEAT_SECONDS

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.5


class RunWatcher:
    """The turns of one event loop, and the task that polls for them."""

    def __init__(self) -> None:
        self.turns: dict[UUID, asyncio.Task[Any]] = {}
        self.poller: asyncio.Task[None] | None = None

    def watch(self, run_id: UUID, turn: asyncio.Task[Any]) -> Callable[[], None]:
        self.turns[run_id] = turn
        if self.poller is None or self.poller.done():
            self.poller = asyncio.create_task(self._poll(), name="run-watcher")

        def unwatch() -> None:
            self.turns.pop(run_id, None)

        return unwatch

    async def _poll(self) -> None:
        try:
            await self._poll_while_watched()
        finally:
            # The watcher and its task refer to the loop: with nothing to watch, it goes,
            # so that a loop that has run its course can be collected.
            loop = asyncio.get_running_loop()
            if not self.turns and _watchers.get(loop) is self:
                del _watchers[loop]

    async def _poll_while_watched(self) -> None:
        polls_per_beat = max(1, round(HEARTBEAT_SECONDS / POLL_SECONDS))
        polls = 0
        while self.turns:
            await asyncio.sleep(POLL_SECONDS)
            watched = list(self.turns)
            if not watched:
                return
            try:
                stopping = await store.runs_to_stop(run_ids=watched)
                polls += 1
                if polls % polls_per_beat == 0:
                    await store.beat(run_ids=watched)
            except Exception:  # a database that is away for a moment must not end the watch
                logger.warning("could not poll the running turns", exc_info=True)
                continue
            for run_id in stopping:
                turn = self.turns.pop(run_id, None)
                if turn is not None and not turn.cancelling() and not turn.done():
                    turn.cancel()


_watchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, RunWatcher] = (
    weakref.WeakKeyDictionary()
)


def watch_run(run_id: UUID, turn: asyncio.Task[Any]) -> Callable[[], None]:
    """Cancel `turn` when its run is asked to stop or deleted; beat its heartbeat meanwhile.

    Returns the function that ends the watch.
    """
    loop = asyncio.get_running_loop()
    watcher = _watchers.get(loop)
    if watcher is None:
        watcher = _watchers[loop] = RunWatcher()
    return watcher.watch(run_id, turn)
