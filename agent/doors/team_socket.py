"""What a chat socket does beyond a personal chat's on a team chat: it shows who is looking
(`presence`), and closes the moment its person is no longer a member of the team. And how
every chat socket takes the layer's messages: straight to their handlers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from channels.consumer import get_handler_name
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from agent.doors.presence import Presence, SendFrame
from agent.turn import is_member
from sessions_app.people import person

CLOSE_NOT_FOUND = 4404
LEFT_TEXT = "you are no longer a member of this chat's team"


class TeamChatSocket(AsyncJsonWebsocketConsumer):
    """The base of the chat socket. `team_id` is set once the socket knows its session,
    `group` and `session_id` by the consumer; it hands in how it sends its client a frame."""

    team_id: int | None = None
    presence: Presence | None = None
    session_id: int | None = None
    group = ""

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Channels closes the stale database connections of its one sync thread before
        each message a consumer handles, in that thread. The socket's frames may use it
        (`sync_to_async`); the layer's messages (group events, presence, marks) never do,
        and behind a busy server's queries that hop held each of them up for seconds: a
        tab that had just opened heard a turn start only once it had ended, and missed its
        stream. They go straight to their handlers."""
        if message["type"].startswith("websocket."):
            await super().dispatch(message)
            return
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def join_presence(self, user: Any, send: SendFrame) -> None:
        """On a team chat: tell the chat's other sockets this one's person is looking; the
        list of who is goes to `send`."""
        if self.team_id is None:
            return
        self.presence = Presence(
            self.channel_layer, self.group, self.channel_name, person(user), send
        )
        await self.presence.join()

    async def leave_presence(self) -> None:
        if self.presence is not None:
            await self.presence.leave()
            self.presence = None

    async def presence_hello(self, message: dict[str, Any]) -> None:
        """Presence (`presence`): a viewer came, went, or answered this one's hello."""
        if self.presence is not None:
            await self.presence.heard(message)

    presence_here = presence_alive = presence_bye = presence_hello

    async def still_a_member(self, user_id: int, error: Callable[[str], Awaitable[None]]) -> bool:
        """On a team chat, whether user `user_id`, the socket's, is still in its team: one
        who left is told (`error`), and the socket closes as on a chat that is not theirs."""
        team = self.team_id
        if self.session_id is None or team is None:
            return True
        if await is_member(user_id=user_id, team_id=team):
            return True
        await error(LEFT_TEXT)
        self.session_id = None
        await self.close(code=CLOSE_NOT_FOUND)
        return False
