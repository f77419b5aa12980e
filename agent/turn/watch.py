"""One watcher for every turn a process runs: stops asked for elsewhere, and marks of life.

A `/stop` from another process (or host) reaches a turn at once through the channel layer:
the watcher listens on one channel for every turn it runs, each turn's stop group leading
there (`announce_stop`). The flag on the run record is the backstop, for a layer that lost
the message or that reaches no other process (the in-memory one), and a delete of the
session takes the run record with it. Polling for those per turn would cost a query per
turn twice a second, which at fifty concurrent turns is a good part of a core; one poll
asks about all of them, and the same loop marks their runs alive.

The run's group also carries the requests of sockets that open while the turn streams and
want the text so far (`live`).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Callable, Coroutine, Iterable
from typing import Any
from uuid import UUID

from channels.layers import get_channel_layer

from agent.turn import live, store
from agent.turn.db import detached_context
from agent.turn.groups import run_group
from sessions_app.models import MARK_ALIVE_SECONDS

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.5
# A layer that hangs (Redis gone away) is given up on after this: the poll still stops turns.
LAYER_TIMEOUT = 5.0
STOP = "run.stop"


class RunWatcher:
    """The turns of one event loop, the task that polls for them, and the one that listens
    for their stops.

    Its tasks serve every turn of the loop, not the one that started them: they start in a
    context of their own (`detached_context`), or a task run from an API request would
    leave them its view's thread, which is gone once the request is answered.
    """

    def __init__(self) -> None:
        self.turns: dict[UUID, asyncio.Task[Any]] = {}
        self.poller: asyncio.Task[None] | None = None
        self.listener: asyncio.Task[None] | None = None
        self.channel: asyncio.Future[str] | None = None
        self.chores: set[asyncio.Task[None]] = set()

    def watch(self, run_id: UUID, turn: asyncio.Task[Any]) -> Callable[[], None]:
        self.turns[run_id] = turn
        if self.poller is None or self.poller.done():
            self.poller = asyncio.create_task(
                self._poll(), name="run-watcher", context=detached_context()
            )
        layer = get_channel_layer()
        if layer is not None:
            if self.listener is None or self.listener.done():
                self.channel = asyncio.get_running_loop().create_future()
                self.listener = asyncio.create_task(
                    self._listen(layer), name="stop-listener", context=detached_context()
                )
            self._chore(self._subscribe(layer, run_id, add=True))

        def unwatch() -> None:
            self._forget(run_id)

        return unwatch

    def _forget(self, run_id: UUID) -> asyncio.Task[Any] | None:
        turn = self.turns.pop(run_id, None)
        layer = get_channel_layer()
        if turn is not None and layer is not None and self.channel is not None:
            self._chore(self._subscribe(layer, run_id, add=False))
        return turn

    def _chore(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work, context=detached_context())
        self.chores.add(task)
        task.add_done_callback(self.chores.discard)

    async def _subscribe(self, layer: Any, run_id: UUID, *, add: bool) -> None:
        assert self.channel is not None
        try:
            channel = await asyncio.wait_for(asyncio.shield(self.channel), LAYER_TIMEOUT)
            change = layer.group_add if add else layer.group_discard
            await asyncio.wait_for(change(run_group(run_id), channel), LAYER_TIMEOUT)
        except asyncio.CancelledError:
            raise
        except Exception:  # the flag on the run record still stops the turn
            logger.warning("could not listen for stops of run %s", run_id, exc_info=True)

    async def _listen(self, layer: Any) -> None:
        assert self.channel is not None
        try:
            channel = await layer.new_channel()
            self.channel.set_result(channel)
            while True:
                message = await layer.receive(channel)
                if message.get("type") == STOP:
                    self._stop(UUID(message["run"]))
                elif message.get("type") == live.JOIN:
                    live.add_viewer(UUID(message["run"]), message["reply_to"])
                elif message.get("type") == live.LEAVE:
                    live.remove_viewer(UUID(message["run"]), message["reply_to"])
        except asyncio.CancelledError:
            raise
        except Exception:  # the poll still sees the flag, half a second later
            logger.warning("stopped listening for stops through the channel layer", exc_info=True)
            if not self.channel.done():
                self.channel.set_exception(RuntimeError("no stop channel"))

    def _stop(self, run_id: UUID) -> None:
        turn = self._forget(run_id)
        if turn is not None and not turn.cancelling() and not turn.done():
            turn.cancel()

    async def _poll(self) -> None:
        try:
            await self._poll_while_watched()
        finally:
            if self.listener is not None and not self.turns:
                # Only one loop at a time may receive on a layer (channels-redis): a loop
                # with no turns left lets go of it.
                self.listener.cancel()
                self.listener = None
            # The watcher and its task refer to the loop: with nothing to watch, it goes,
            # so that a loop that has run its course can be collected.
            loop = asyncio.get_running_loop()
            if not self.turns and _watchers.get(loop) is self:
                del _watchers[loop]

    async def _poll_while_watched(self) -> None:
        polls_per_mark = max(1, round(MARK_ALIVE_SECONDS / POLL_SECONDS))
        polls = 0
        while self.turns:
            await asyncio.sleep(POLL_SECONDS)
            watched = list(self.turns)
            if not watched:
                return
            try:
                stopping = await store.runs_to_stop(run_ids=watched)
                polls += 1
                if polls % polls_per_mark == 0:
                    await store.mark_alive(run_ids=watched)
            except Exception:  # a database that is away for a moment must not end the watch
                logger.warning("could not poll the running turns", exc_info=True)
                continue
            for run_id in stopping:
                self._stop(run_id)


_watchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, RunWatcher] = (
    weakref.WeakKeyDictionary()
)


async def announce_stop(run_ids: Iterable[UUID]) -> None:
    """Tell the processes running these turns to stop them now. Callers flag the runs on
    their records first: a stop the layer loses is still seen by the next poll."""
    layer = get_channel_layer()
    if layer is None:
        return
    for run_id in run_ids:
        message = {"type": STOP, "run": run_id.hex}
        try:
            await asyncio.wait_for(layer.group_send(run_group(run_id), message), LAYER_TIMEOUT)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.warning("could not announce the stop of run %s", run_id, exc_info=True)


def watched_runs() -> list[UUID]:
    """The runs whose turns this process is running now, on any of its event loops. For a
    worker that stops mid-turn (its cluster's stop hooks), from a thread of its own: it reads
    copies of what the loops change, and tries again if one changed meanwhile."""
    for _ in range(5):
        try:
            return [run for watcher in list(_watchers.values()) for run in list(watcher.turns)]
        except RuntimeError:  # a loop added or removed a turn while this read
            continue
    return []


def watch_run(run_id: UUID, turn: asyncio.Task[Any]) -> Callable[[], None]:
    """Cancel `turn` when its run is asked to stop or deleted; mark its run alive meanwhile.

    Returns the function that ends the watch.
    """
    loop = asyncio.get_running_loop()
    watcher = _watchers.get(loop)
    if watcher is None:
        watcher = _watchers[loop] = RunWatcher()
    return watcher.watch(run_id, turn)
