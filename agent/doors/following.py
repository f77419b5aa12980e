"""A chat socket's watch over a turn it shows running but did not start.

Such a turn's events may never reach the socket: it runs in another process without a
shared channel layer, or in one that died. So while the socket shows it running, its record
is looked at every `FOLLOW_SECONDS`, and once it has ended (or waits for a person) the socket
shows that end itself: the turn's own events, when they do travel, arrive in the meantime
and end the watch first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID

from agent.events import MessageEvent, ThinkingFinished
from agent.turn import get_run
from sessions_app.models import Run

FOLLOW_SECONDS = 2.0

Send = Callable[[dict[str, Any]], Awaitable[None]]


class RunFollower:
    """Follows one turn at a time for a socket whose frames go to `send`."""

    def __init__(self, send: Send) -> None:
        self.send = send
        self.followed: str | None = None
        self.task: asyncio.Task[None] | None = None

    def follow(self, run_id: str) -> None:
        """Watch the turn of run `run_id`, unless one is watched already."""
        if not run_id or (self.task is not None and not self.task.done()):
            return
        self.followed = run_id
        self.task = asyncio.create_task(self._until_done(run_id))

    def ended(self, run_id: str) -> None:
        """The turn's own end reached the socket: the watch has nothing more to show."""
        if run_id == self.followed:
            self.followed = None

    def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()

    async def _until_done(self, run_id: str) -> None:
        while self.followed == run_id:
            await asyncio.sleep(FOLLOW_SECONDS)
            run = await get_run(run_id=UUID(run_id))
            if run is None:
                return  # deleted with its session: the socket is closing
            if run.status == Run.Status.RUNNING:
                continue
            # Ended, or waiting for a person: this turn is not running any more. The turn's
            # own events, when they travel here, arrive in the meantime.
            await asyncio.sleep(FOLLOW_SECONDS)
            if self.followed != run_id:
                return
            self.followed = None
            await self.send(ThinkingFinished(run_id=run_id).to_dict())
            if run.status != Run.Status.CANCELLED and run.text:
                reply = MessageEvent(
                    role="assistant",
                    content=run.text,
                    run_id=run_id,
                    model=run.model or None,
                    created=run.finished.isoformat() if run.finished else None,
                )
                await self.send(reply.to_dict())
