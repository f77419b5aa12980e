"""Who is looking at a team chat right now, across processes, over the channel layer.

Each socket on a team chat keeps its own list of the chat's sockets and their people. It
says hello to the session's group when it opens (`presence.hello`), and every socket that
hears it answers the newcomer alone (`presence.here`); it says goodbye when it closes
(`presence.bye`). Whenever the people it knows of change, it sends its client a
`presence` frame, `{viewers: [{id, name}]}`, each person once however many tabs they have.
Three small messages per socket that comes or goes, none per token: the layer's capacity
is kept for turns.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

logger = logging.getLogger(__name__)

HELLO = "presence.hello"
HERE = "presence.here"
BYE = "presence.bye"

SendFrame = Callable[[dict[str, Any]], Awaitable[None]]


class Presence:
    def __init__(
        self, layer: Any, group: str, channel: str, me: dict[str, Any], send: SendFrame
    ) -> None:
        self.layer = layer
        self.group = group
        self.channel = channel
        self.me = me
        self.send = send
        self.viewers: dict[str, dict[str, Any]] = {channel: me}
        self.shown: list[dict[str, Any]] | None = None

    async def join(self) -> None:
        await self._show()
        await self._tell_group(HELLO)

    async def leave(self) -> None:
        await self._tell_group(BYE)

    async def heard(self, message: dict[str, Any]) -> None:
        """A presence message of the group's, or one a newcomer answered to this socket."""
        channel, viewer = message.get("channel"), message.get("viewer")
        if not isinstance(channel, str) or channel == self.channel:
            return
        if message["type"] == BYE:
            self.viewers.pop(channel, None)
        elif isinstance(viewer, dict):
            self.viewers[channel] = viewer
            if message["type"] == HELLO:
                answer = {"type": HERE, "channel": self.channel, "viewer": self.me}
                try:
                    await self.layer.send(channel, answer)
                except Exception:  # it learns of this socket at its next hello or never
                    logger.warning("could not answer %s's hello", channel, exc_info=True)
        await self._show()

    async def _show(self) -> None:
        people: dict[Any, dict[str, Any]] = {}
        for viewer in self.viewers.values():
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
