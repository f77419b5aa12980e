"""Saves a turn's messages in order, without making the turn wait for each write.

Each message is handed over the moment it exists and written by a task of its own that
waits for the one before it, so the rows keep their order while the loop goes on to its
next model call. A stopped turn's writes still finish (the tasks are not the turn's), and
the turn's record is closed only after `flush`. A write that fails (the session was
deleted meanwhile) fails every write after it, and the turn learns of it at its next
message or at `flush`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agent.turn import store
from sessions_app.models import Run, Session

# Writes still under way; the event loop keeps only weak references to tasks.
_writing: set[asyncio.Task[None]] = set()


class MessageLog:
    def __init__(self, session: Session, run: Run) -> None:
        self.session = session
        self.run = run
        self.last: asyncio.Task[None] | None = None

    async def add(self, message: dict[str, Any], usage: dict[str, int] | None) -> None:
        """Queue `message` for saving; raise what an earlier write failed with."""
        previous = self.last
        if previous is not None and previous.done():
            previous.result()
        self.last = asyncio.ensure_future(self._write(previous, message, usage))
        _writing.add(self.last)
        self.last.add_done_callback(_writing.discard)

    async def _write(
        self,
        previous: asyncio.Task[None] | None,
        message: dict[str, Any],
        usage: dict[str, int] | None,
    ) -> None:
        if previous is not None:
            await previous
        await store.add_message(session=self.session, run=self.run, message=message, usage=usage)

    async def flush(self) -> None:
        """Wait until every message handed over is saved; raise what a write failed with."""
        if self.last is not None:
            # Shielded: a stop arriving now must not lose a write that is half done.
            await asyncio.shield(self.last)
