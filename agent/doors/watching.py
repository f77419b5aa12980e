"""What a chat socket shows of the turns of its session that it did not start.

It streams each one's reply as the socket that started it does: a turn of its own event
loop it joins at once (`join_stream_here`), one of another process it asks through the
channel layer (`StreamJoin`), and watches that one's record too, since its events may never
get here (`RunFollower`). Turns of a session run one at a time, so a socket views one at a
time: joining the next leaves the last.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID

from agent.doors.following import RunFollower
from agent.doors.joining import StreamJoin
from agent.turn import join_stream_here, leave_stream_here

Send = Callable[[dict[str, Any]], Awaitable[None]]


class TurnViews:
    """The other turns one socket, `channel`, whose frames go to `send`, shows."""

    def __init__(self, channel: str, send: Send) -> None:
        self.channel = channel
        self.send = send
        # The turn of this loop whose stream it joined, or the request to one elsewhere.
        self.here: UUID | None = None
        self.joiner: StreamJoin | None = None
        self.follower: RunFollower | None = None

    def heard(self, frame: dict[str, Any]) -> None:
        """A frame of the session's group reached the socket (and was sent on)."""
        kind, run_id = frame.get("type"), frame.get("run_id")
        if kind == "thinking_started" and run_id:
            self.stream(UUID(run_id))
        elif kind == "thinking_finished" and self.follower is not None:
            self.follower.ended(run_id or "")

    def stream(self, run_id: UUID) -> None:
        """Stream the reply of run `run_id`'s turn: the text so far, then the rest."""
        if run_id in (self.here, self.joiner and self.joiner.run_id):
            return
        self._leave()
        if join_stream_here(run_id, self.channel, self.send):
            self.here = run_id
            return
        self.joiner = StreamJoin(run_id, self.channel)
        self.follow(str(run_id))

    def follow(self, run_id: str) -> None:
        """Watch the record of a turn the socket shows running (`following`)."""
        if self.follower is None:
            self.follower = RunFollower(self.send)
        self.follower.follow(run_id)

    def took(self) -> None:
        """The turn elsewhere took the request to join its stream; its frames follow."""
        if self.joiner is not None:
            self.joiner.took()

    async def close(self) -> None:
        """The socket closed: no turn sends it anything more."""
        if self.follower is not None:
            self.follower.stop()
        if self.joiner is not None:
            await self.joiner.leave()
        if self.here is not None:
            leave_stream_here(self.here, self.channel)

    def _leave(self) -> None:
        # The turn viewed before has ended.
        if self.here is not None:
            leave_stream_here(self.here, self.channel)
            self.here = None
        if self.joiner is not None:
            self.joiner.drop()
            self.joiner = None
