"""Events from a worker to the web server's sockets when they share no channel layer.

Without Redis each process has a channel layer of its own (in memory), so what a worker
publishes (a cron job's answer, a sub-agent's report, the turns they run) would reach no
socket. A worker then also writes it to the database (`Relayed`), and each web server
process that has sockets open reads what others wrote, twice a second, and passes it on to
its own layer. With Redis none of this runs: the layer is shared.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import weakref
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from channels.layers import InMemoryChannelLayer, get_channel_layer

from agent.turn import store
from agent.turn.db import detached_context
from agent.turn.groups import session_group
from sessions_app import services

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.5
# Long enough for any web server to have read it.
KEEP = timedelta(minutes=5)
ORIGIN = f"{socket.gethostname()}:{os.getpid()}"

_writing = False


def layer_is_local() -> bool:
    """Whether this process's channel layer reaches only its own sockets."""
    return isinstance(get_channel_layer(), InMemoryChannelLayer)


def prune_relayed() -> int:
    """Forget what was relayed long enough ago for every web server to have read it; how
    many rows that was (for the worker's sweep, from sync code)."""
    return services.prune_relayed(older_than=KEEP)


def write_through_database() -> None:
    """Called in a worker process (django-q2's `pre_execute`): its events go through the
    database too, if its layer is its own."""
    global _writing
    _writing = layer_is_local()


async def forward(session_id: int, message: dict[str, Any]) -> None:
    """Leave `message` for the web server, if this process's events go that way."""
    if _writing:
        await store.relay(session_id=session_id, message=message, origin=ORIGIN)


class RelayReader:
    """Reads what other processes relayed and hands it to this process's layer, while at
    least one socket listens."""

    def __init__(self) -> None:
        self.listeners = 0
        self.task: asyncio.Task[None] | None = None

    def listen(self) -> Callable[[], None]:
        self.listeners += 1
        if self.task is None or self.task.done():
            # Serves every socket of the loop, not the one that started it.
            self.task = asyncio.create_task(
                self._read(), name="relay-reader", context=detached_context()
            )

        def stop() -> None:
            self.listeners -= 1

        return stop

    async def _read(self) -> None:
        layer = get_channel_layer()
        last = await store.last_relayed_id()
        while self.listeners > 0:
            await asyncio.sleep(POLL_SECONDS)
            try:
                rows = await store.relayed_after(after_id=last)
            except Exception:  # a database away for a moment must not end the reading
                logger.warning("could not read relayed events", exc_info=True)
                continue
            for row_id, session_id, origin, message in rows:
                last = row_id
                if origin != ORIGIN:
                    await layer.group_send(session_group(session_id), message)


_readers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, RelayReader] = (
    weakref.WeakKeyDictionary()
)


def listen_to_relayed() -> Callable[[], None]:
    """A socket of this process wants relayed events; returns the function that ends that.
    Nothing to do when the layer is shared (Redis)."""
    if not layer_is_local():
        return lambda: None
    loop = asyncio.get_running_loop()
    reader = _readers.get(loop)
    if reader is None:
        reader = _readers[loop] = RelayReader()
    return reader.listen()
