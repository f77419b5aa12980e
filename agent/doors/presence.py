"""Who is looking at a team chat right now, across processes, over the channel layer.

Each socket on a team chat keeps its own list of the chat's sockets and their people. It
says hello to the session's group when it opens (`presence.hello`), and every socket that
hears it answers the newcomer alone (`presence.here`); it says goodbye when it closes
(`presence.bye`). A socket whose process died says no goodbye: so each one also says it is
still there every `REFRESH_SECONDS` (`presence.alive`), and one not heard from for
`GONE_AFTER_SECONDS` is taken off the list. Whenever the people it knows of change, it sends
its client a `presence` frame, `{viewers: [{id, name}]}`, each person once however many tabs
they have. A few small messages per socket, none per token: the layer's capacity is kept
for turns.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

logger = logging.getLogger(__name__)

HELLO = "presence.hello"
HERE = "presence.here"
ALIVE = "presence.alive"
BYE = "presence.bye"
REFRESH_SECONDS = 30.0
GONE_AFTER_SECONDS = 2.5 * REFRESH_SECONDS

SendFrame = Callable[[dict[str, Any]], Awaitable[None]]


class Presence:
    def __init__(
        self,
        layer: Any,
        group: str,
        channel: str,
        me: dict[str, Any],
        send: SendFrame,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.layer = layer
        self.group = group
        self.channel = channel
        self.me = me
        self.send = send
        self.clock = clock
        # Each socket of the chat: its person, and when it was last heard from.
        self.viewers: dict[str, tuple[dict[str, Any], float]] = {channel: (me, clock())}
        self.shown: list[dict[str, Any]] | None = None
        self.refreshing: asyncio.Task[None] | None = None

    async def join(self) -> None:
        await self._show()
        await self._tell_group(HELLO)
        self.refreshing = asyncio.get_running_loop().create_task(self._refresh())

    async def leave(self) -> None:
        if self.refreshing is not None:
            self.refreshing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.refreshing
        await self._tell_group(BYE)

    async def heard(self, message: dict[str, Any]) -> None:
        """A presence message of the group's, or one a newcomer answered to this socket."""
        channel, viewer = message.get("channel"), message.get("viewer")
        if not isinstance(channel, str) or channel == self.channel:
            return
        if message["type"] == BYE:
            self.viewers.pop(channel, None)
        elif isinstance(viewer, dict):
            self.viewers[channel] = (viewer, self.clock())
            if message["type"] == HELLO:
                answer = {"type": HERE, "channel": self.channel, "viewer": self.me}
                try:
                    await self.layer.send(channel, answer)
                except Exception:  # it learns of this socket when it next says it is alive
                    logger.warning("could not answer %s's hello", channel, exc_info=True)
        await self._show()

    async def prune(self) -> None:
        """Take off the list the sockets not heard from for a while (their process died)."""
        now = self.clock()
        for channel, (_, seen) in list(self.viewers.items()):
            if channel != self.channel and now - seen > GONE_AFTER_SECONDS:
                del self.viewers[channel]
        await self._show()

    async def _refresh(self) -> None:
        while True:
            await asyncio.sleep(REFRESH_SECONDS)
            await self._tell_group(ALIVE)
            await self.prune()

    async def _show(self) -> None:
        people: dict[Any, dict[str, Any]] = {}
        for viewer, _ in self.viewers.values():
            people.setdefault(viewer.get("id"), viewer)
        viewers = sorted(people.values(), key=lambda viewer: str(viewer.get("name", "")))
        if viewers != self.shown:
            self.shown = viewers
            await self.send({"type": "presence", "viewers": viewers})

    async def _tell_group(self, kind: str) -> None:
        message = {"type": kind, "channel": self.channel, "viewer": self.me}
        try:
            await self.layer.group_send(self.group, message)
        except Exception:  # presence is a courtesy: the chat works without it
            logger.warning(
                "could not tell %s that a viewer came or went", self.group, exc_info=True
            )
