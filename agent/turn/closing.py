"""The end of a turn: its run record closed however the turn ended (finished, stopped,
crashed, overtaken by another turn of its session, with its session deleted under it, or
waiting for a person), its answer sent, its spans exported and its hooks told.

The record is closed after the messages it counts are saved, and is closed whatever became
of them; a stop that arrives meanwhile must not leave it open (`for_sure`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from django.utils import timezone

from agent.conf import AgentSettings
from agent.events import Emit, MessageEvent, ThinkingFinished
from agent.gate import WaitingCall
from agent.loop import SPOKEN_FAILURES, LoopResult
from agent.tools.hooks import TurnHooks
from agent.turn import store, waiting
from agent.turn.delivery import Delivery
from agent.turn.message_log import Entry, MessageLog
from agent.turn.outcome import TurnResult
from agent.turn.trace import TraceRecorder
from sessions_app.models import Run, Session
from sessions_app.services import SessionDeleted, TurnSuperseded
from sessions_app.usage import run_usage

logger = logging.getLogger(__name__)

STOPPED_TEXT = "Stopped."
LOST_LOCK_TEXT = (
    "This turn stopped: its connection to the database was lost, and another turn of this "
    "conversation started meanwhile. Nothing more of it was saved; send your message again."
)

# Records being closed after a stop; the event loop keeps only weak references to tasks.
_closing: set[asyncio.Future[Any]] = set()

T = TypeVar("T")


async def for_sure(closing: Coroutine[Any, Any, T]) -> T:
    """Run `closing` to its end even if another cancel arrives meanwhile: the session's lock
    is held until the record is closed, and the next turn must find every message saved."""
    task = asyncio.ensure_future(closing)
    _closing.add(task)
    task.add_done_callback(_closing.discard)
    while not task.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(task)
    return task.result()


def stopped(done: LoopResult | None) -> LoopResult:
    """The outcome of a stopped turn: what it did before the stop still counts (iterations,
    tools, tokens)."""
    outcome = done if done is not None else LoopResult("", "failed", 0)
    outcome.text = STOPPED_TEXT
    return outcome


def lost(done: LoopResult | None) -> LoopResult:
    """The outcome of a turn another turn of its session overtook: what it did before
    still counts, but it failed."""
    done = done if done is not None else LoopResult("", "failed", 0)
    return LoopResult(
        text=LOST_LOCK_TEXT,
        status="failed",
        iterations=done.iterations,
        tools_used=done.tools_used,
        usage=done.usage,
        cost=done.cost,
        error="lost the session's lock to another turn",
        error_kind="lost_lock",
    )


@dataclass
class RunClose:
    """What closing the run of a turn needs of it, as it stands when the turn ends."""

    session: Session
    run: Run
    emit: Emit
    conf: AgentSettings
    log: MessageLog
    delivery: Delivery
    hooks: TurnHooks | None
    trace: TraceRecorder | None
    exporting: bool
    # What the loop had done, if it started: an overtaken turn still counts it.
    done: LoopResult | None
    # Whether the run may hold part of its owner's budget: one with a budget, or one that
    # waited, whatever its budget is now.
    held: bool
    endpoint: str | None

    @property
    def run_id(self) -> str:
        return str(self.run.pk)

    async def close(
        self, outcome: LoopResult, *, cancelled: bool = False, lost_lock: bool = False
    ) -> TurnResult:
        # A session deleted meanwhile has nothing left to close: `finish_run` then updates
        # nothing.
        messages: list[Entry] = []
        try:
            messages = await self.log.held()
        except SessionDeleted:
            logger.info("the session of run %s was deleted while it ran", self.run_id)
        except TurnSuperseded:
            outcome, cancelled, lost_lock = lost(self.done), False, True
        except Exception:
            logger.exception("a message of run %s could not be saved", self.run_id)
        if lost_lock:
            # What it still held (its answer, or the part of one it was cut off in) came
            # after it lost the lock: saving it could interleave with the next turn's.
            messages = []
        status: str = Run.Status.CANCELLED if cancelled else outcome.status
        if status == Run.Status.WAITING:
            return await self._wait(outcome, messages)
        try:
            await self.finish(outcome, status, messages, cancelled=cancelled)
        except SessionDeleted:
            logger.info("the session of run %s was deleted as it ended", self.run_id)
            await self.count_deleted(outcome, status, cancelled=cancelled)
        except TurnSuperseded:
            # Overtaken between its last write and its end: the run closes, without them.
            outcome, status, cancelled = lost(self.done), Run.Status.FAILED, False
            await self.finish(outcome, status, [], cancelled=False)
        used = run_usage(self.run)
        await self.emit(ThinkingFinished(run_id=self.run_id, usage=used))
        succeeded = status == Run.Status.SUCCEEDED
        # A stopped turn has no reply (the /stop answer says what happened). A reply is not
        # sent twice: not when the model already sent these very words here as a message.
        here = self.delivery.home is self.session
        handed_over = succeeded and bool(outcome.handed_over)
        # A model that only called the client's tools said nothing to show.
        silent = handed_over and not outcome.text
        repeated = succeeded and here and self.delivery.repeats(outcome.text)
        if not cancelled and not silent and not repeated:
            failed = status == Run.Status.FAILED and outcome.error_kind not in SPOKEN_FAILURES
            reply = MessageEvent(
                role="assistant",
                content=outcome.text,
                run_id=self.run_id,
                usage=used,
                error=True if failed else None,
                model=self.run.model or None,
                created=timezone.now().isoformat(),
            )
            await self.emit(reply)
        if self.exporting:  # after the answer, which the spans must not hold up
            await asyncio.to_thread(self._export, outcome, str(status))
        if self.hooks is not None:
            # After the run is recorded and its answer sent: a slow hook delays neither.
            await self.hooks.turn_end(
                status=str(status),
                text=outcome.text,
                error=outcome.error,
                iterations=outcome.iterations,
                tools_used=outcome.tools_used,
            )
        return TurnResult(
            session_key=self.session.key,
            text=outcome.text,
            status=status,
            run_id=self.run_id,
            iterations=outcome.iterations,
            tools_used=outcome.tools_used,
            usage=outcome.usage,
            error=outcome.error,
            error_kind=outcome.error_kind,
            delivered=succeeded and bool(self.delivery.said),
            endpoint=self.endpoint,
            handed_over=[handed(call) for call in outcome.handed_over] if handed_over else [],
            logprobs=outcome.logprobs,
        )

    async def _wait(self, outcome: LoopResult, messages: list[Entry]) -> TurnResult:
        """Leave the run waiting for a person's answers, and ask every socket of the
        session; a turn stopped meanwhile ends stopped instead."""
        try:
            # Its trace so far is kept with it: the turn's ending records the rest.
            trace = self.trace.everything() if self.trace is not None and self.conf.trace else None
            asked = await waiting.park(self.run, outcome, messages, conf=self.conf, trace=trace)
        except SessionDeleted:
            logger.info("the session of run %s was deleted as it began to wait", self.run_id)
            asked = None
        except TurnSuperseded:
            overtaken = lost(self.done)
            await self.finish(overtaken, Run.Status.FAILED, [], cancelled=False)
            await self.emit(ThinkingFinished(run_id=self.run_id))
            return TurnResult(self.session.key, overtaken.text, Run.Status.FAILED, self.run_id)
        if asked is not None:
            for request in asked:
                await self.emit(request)
        await self.emit(ThinkingFinished(run_id=self.run_id))
        return TurnResult(
            session_key=self.session.key,
            text="" if asked is not None else STOPPED_TEXT,
            status=Run.Status.WAITING if asked is not None else Run.Status.CANCELLED,
            run_id=self.run_id,
            iterations=outcome.iterations,
            tools_used=outcome.tools_used,
            usage=outcome.usage,
            pending=[
                {"id": request.id, "name": request.name, "arguments": request.arguments}
                for request in asked or []
            ],
        )

    async def finish(
        self, outcome: LoopResult, status: str, messages: list[Entry], *, cancelled: bool
    ) -> None:
        await store.finish_run(
            run=self.run,
            status=status,
            text=outcome.text,
            error=outcome.error or ("stopped by the user" if cancelled else None),
            iterations=outcome.iterations,
            tools_used=outcome.tools_used,
            usage=outcome.usage,
            cost=outcome.cost,
            messages=messages,
            trace=self.trace.everything() if self.trace is not None and self.conf.trace else None,
            held=self.held,
        )

    async def count_deleted(
        self, outcome: LoopResult, status: str, *, cancelled: bool = False
    ) -> None:
        """A run deleted with its session while it ran: what it cost was spent all the same,
        and goes into its owner's ledger (else deleting a chat gave its turn's spending back
        once its hold expired). The run stays deleted (`finish_run`)."""
        try:
            await self.finish(outcome, status, [], cancelled=cancelled)
        except Exception:
            logger.exception("what run %s cost could not be counted", self.run_id)

    def _export(self, outcome: LoopResult, status: str) -> None:
        """The run as OpenTelemetry spans (in a thread: the SDK loads with the first)."""
        try:
            from agent.turn import telemetry
        except ImportError as exc:
            logger.warning("runs are not exported: OpenTelemetry is not installed (%s)", exc)
            return
        telemetry.export_run(
            self.run,
            session_key=self.session.key,
            status=status,
            error=outcome.error,
            error_kind=outcome.error_kind,
            usage=outcome.usage,
            cost=outcome.cost,
            steps=self.trace.everything() if self.trace is not None else [],
            conf=self.conf,
        )


def handed(call: WaitingCall) -> dict[str, str]:
    arguments = call.arguments
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return {"id": call.id, "name": call.name, "arguments": text}
