"""Saves a turn's messages in order, without making the turn wait for each write.

Each message is handed over the moment it exists. One writer task per turn saves what has
been handed over, in order, and whatever arrived while it was writing goes in its next
batch: one transaction for many messages when the database is busy, which is when it
counts. The writer is not the turn's task, so a stopped turn's writes still finish.

The model's plain answer ends the loop, so it is held and saved with the run's ending in
one transaction (`held`, then `finish_run`). A write that fails (the session was deleted
meanwhile, or another turn of it started) fails every write after it, and the turn learns
of it at its next message or at `flush`.

The run's trace (`trace.TraceRecorder`), when it is kept, goes with a batch: the steps
recorded so far are saved in the batch's transaction, at no round trip of their own. It
may go at most once a second (`trace.SAVE_EVERY`); steps that no batch has taken by then
are saved on their own, by the same writer.

Each message is numbered as it is handed over, from 1 for the run's first: a batch written
again (its first write's commit went through but the reply was lost) is saved once.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agent.turn import store
from agent.turn.trace import TraceRecorder
from sessions_app.models import Run, Session
from sessions_app.services import NewMessage

Entry = NewMessage

# Writers still under way; the event loop keeps only weak references to tasks.
_writing: set[asyncio.Task[None]] = set()


class MessageLog:
    def __init__(
        self,
        session: Session,
        run: Run,
        trace: TraceRecorder | None = None,
        *,
        numbered: int = 0,
    ) -> None:
        """`numbered`: how many messages the run has saved already (a turn that waited for
        a person and goes on)."""
        self.session = session
        self.run = run
        self.trace = trace
        self.pending: list[Entry] = []
        self.writer: asyncio.Task[None] | None = None
        self.handed_over = numbered
        self._trace_timer: asyncio.TimerHandle | None = None
        self._closed = False

    async def add(self, message: dict[str, Any], usage: dict[str, int] | None) -> None:
        """Hand `message` over for saving; raise what an earlier write failed with."""
        if self.writer is not None and self.writer.done():
            self.writer.result()
        self.handed_over += 1
        self.pending.append(Entry(message, usage, self.handed_over))
        if _ends_the_loop(message):
            return
        self._start_writer()

    def _start_writer(self) -> None:
        if self.writer is None or self.writer.done():
            self.writer = asyncio.ensure_future(self._write())
            _writing.add(self.writer)
            self.writer.add_done_callback(_writing.discard)

    async def _write(self) -> None:
        while True:
            batch = self._next_batch()
            steps = self.trace.unsaved() if self.trace is not None else None
            if batch:
                await store.add_messages(
                    session=self.session, run=self.run, messages=batch, trace=steps
                )
            elif steps is not None:
                await store.save_trace(run=self.run, trace=steps)
            else:
                break
        self._save_trace_later()

    def _save_trace_later(self) -> None:
        due = self.trace.due_in() if self.trace is not None else None
        if due is None or self._closed or self._trace_timer is not None:
            return
        self._trace_timer = asyncio.get_running_loop().call_later(due, self._trace_due)

    def _trace_due(self) -> None:
        self._trace_timer = None
        writer = self.writer
        failed = writer is not None and writer.done() and (writer.cancelled() or writer.exception())
        # A failed write stays the writer, for the turn to hear of it at its next message.
        if not self._closed and not failed:
            self._start_writer()

    def _next_batch(self) -> list[Entry]:
        # Everything handed over, but the answer that ends the loop: it waits for `held`.
        end = len(self.pending)
        if end and _ends_the_loop(self.pending[-1].message):
            end -= 1
        batch, self.pending = self.pending[:end], self.pending[end:]
        return batch

    async def flush(self) -> None:
        """Wait until the writes under way are done; raise what a write failed with."""
        if self.writer is not None:
            # Shielded: a stop arriving now must not lose a write that is half done.
            await asyncio.shield(self.writer)

    async def held(self) -> list[Entry]:
        """Once the writes under way are done, what is left to save with the run's ending
        (and the whole trace with it)."""
        self._closed = True
        if self._trace_timer is not None:
            self._trace_timer.cancel()
            self._trace_timer = None
        await self.flush()
        left, self.pending = self.pending, []
        return left


def _ends_the_loop(message: dict[str, Any]) -> bool:
    return message["role"] == "assistant" and not message.get("tool_calls")
