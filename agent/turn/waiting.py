"""A turn that waits for a person: how it is left, and how it is read back to go on.

The loop ends a turn `waiting` when its model asks for a tool that waits (`agent.loop.Gate`).
Everything it said is saved by then, the model's answer with the calls included; `park`
records what it did and a row per call that waits, and the runner asks the sockets. Once the
answers are in, `resumption_of` reads the run back, and a runner of the same run goes on
from there (`TurnRunner(resuming=…)`): the calls that were allowed run, the others get the
person's no, and the loop carries on as if it had never stopped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.conf import AgentSettings
from agent.events import ApprovalRequest, Emit
from agent.gate import Verdicts
from agent.loop import LoopResult
from agent.turn import store
from agent.turn.approvals import STOPPED_RESULT, request_of, resolved, verdicts
from agent.turn.message_log import Entry
from sessions_app.approvals import PendingCall
from sessions_app.models import Approval, Run


@dataclass(frozen=True, slots=True)
class Resumption:
    """What a waiting turn had done when it began to wait."""

    # Its saved messages as the model reads them, its user's message first.
    messages: list[dict[str, Any]]
    # The number of its last saved message (`Message.seq`).
    last_seq: int
    # Its calls that waited, as they were answered.
    answers: list[Approval]
    # Its model calls, tools and tokens so far.
    done: LoopResult


async def park(
    run: Run,
    outcome: LoopResult,
    messages: list[Entry],
    *,
    conf: AgentSettings,
    trace: list[dict[str, Any]] | None = None,
) -> list[ApprovalRequest] | None:
    """Leave `run` waiting on the calls of `outcome` that wait, after saving its last
    `messages`; what to ask the sockets. None when it was stopped meanwhile: it ended
    cancelled, its calls answered as stopped."""
    approvals = await store.park_run(
        run=run,
        pending=[
            PendingCall(call.id, call.name, call.arguments, call.position)
            for call in outcome.waiting
        ],
        timeout=conf.approval_timeout,
        stopped_result=STOPPED_RESULT,
        iterations=outcome.iterations,
        tools_used=outcome.tools_used,
        usage=outcome.usage,
        cost=outcome.cost,
        messages=messages,
        trace=trace,
    )
    return None if approvals is None else [request_of(approval) for approval in approvals]


async def resumption_of(run: Run) -> Resumption:
    saved = await store.run_messages(run_id=run.pk)
    return Resumption(
        messages=[message.as_llm_message() for message in saved],
        last_seq=max((message.seq or 0 for message in saved), default=0),
        answers=await store.answers_of(run_id=run.pk),
        done=LoopResult(
            text="",
            status="succeeded",
            iterations=run.iterations,
            tools_used=list(run.tools_used or []),
            usage=dict(run.usage or {}),
            cost=float(run.cost) if run.cost is not None else None,
        ),
    )


def verdicts_of(resumption: Resumption, conf: AgentSettings) -> Verdicts:
    return verdicts(resumption.answers, timeout=conf.approval_timeout)


async def announce_answers(resumption: Resumption, emit: Emit) -> None:
    """Tell the sockets how each call that waited was answered, as the turn goes on: one
    whose answer they missed (its time ran out in the worker, say) closes its card."""
    for approval in resumption.answers:
        reason = "timeout" if approval.status == Approval.Status.EXPIRED else "answered"
        await emit(resolved(approval, reason))
