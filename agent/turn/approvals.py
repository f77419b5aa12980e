"""Tools that wait for a person: which they are for a turn, the answers, and the ends of
waiting turns.

Which tools wait (`gate_for`): `AGENT_APPROVE_TOOLS`, and what the turn's owner, its
session and the skills its prompt offers add, and what its run carries from the turn that
started it (`carried_approvals`); less the tools its session answered "always" (which its
user may take back, `forget_always`). A turn that nobody can be asked in (a cron job's, the
heartbeat's, a sub-agent's, an OpenAI client's) gets a refusal for such a call at once
instead of waiting.

What a turn starts carries what waited in it beyond what every turn of its owner gets
anyway: a sub-agent's run and the turn that announces how it ended (`Run.approve_tools`),
a job it schedules and so each of its runs (`CronJob.approve_tools`). A chat where `exec`
waits for a yes thus never gets an `exec` run unasked by way of a sub-agent or a job.

The turn that waits is a run left `waiting` with a row per call (`sessions_app.approvals`);
answers come from any door (`answer_approval`; in a team chat, from the member who sent
the message or a team admin alone, `answerers`), a call's time runs out in the worker's
sweep (`settle_approvals`), and `/stop`, a cancel or a new turn of the session end the
wait (`end_waiting`). Whichever way a call is answered, every socket of its session hears
of it (`approval_resolved`), so that its card goes in every tab.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from uuid import UUID

from django.contrib.auth.models import User

from agent import tool_patterns
from agent.conf import AgentSettings
from agent.events import AllowedTools, ApprovalRequest, ApprovalResolved
from agent.gate import Gate, Verdicts
from agent.loop_messages import call_hint
from agent.turn import store
from agent.turn.answerers import answerable_by, refuse_unless_answerer
from agent.turn.fanout import publish
from agent.turn.profiles import Profile
from agent.turn.refusals import SessionGone, TurnError
from sessions_app.approvals import ApprovalClosed as Closed
from sessions_app.approvals import ApprovalNotFound as NotFound
from sessions_app.approvals import Cancelled
from sessions_app.models import Approval, Run, Session

logger = logging.getLogger(__name__)

# How long a run whose calls are all answered is left to the door that answered before the
# sweep queues it for the worker (that door's process may have died before it resumed it).
RESUME_AFTER = timedelta(seconds=10)
HINT_CHARS = 80

STOPPED_RESULT = "Error: the turn was stopped before this tool ran."
SUPERSEDED_RESULT = (
    "Error: the user sent a new message instead of answering whether this tool may run; "
    "it did not run."
)
NO_ONE_TO_ASK = (
    "Error: {name} waits for a person's approval, and there is no one to ask in this turn "
    "(it runs on its own, as a scheduled job, the heartbeat or a sub-agent does, or for a "
    "client that cannot answer); it did not run."
)


class ApprovalNotFound(TurnError):
    """No such call waits for an answer, or it is not the user's."""

    field = "call_id"


class ApprovalClosed(TurnError):
    """The call was answered already, or its turn no longer waits."""

    field = "call_id"


@dataclass(frozen=True, slots=True)
class Answer:
    run_id: UUID
    session_id: int
    # Whether none of the run's calls waits any more: the turn may go on (`resume_turn`).
    ready: bool


def describe_call(name: str, arguments: Any) -> str:
    """`exec(command='rm -rf build')`: what a person was asked, in a line."""
    return call_hint(name, arguments, width=HINT_CHARS)


def verdicts(answers: Iterable[Approval], *, timeout: int) -> Verdicts:
    """What each answered call of a waiting turn gets: None, it runs; else the text the
    model reads instead."""
    found: dict[str, str | None] = {}
    for approval in answers:
        call = describe_call(approval.name, approval.arguments)
        if approval.status == Approval.Status.ALLOWED:
            found[approval.call_id] = None
        elif approval.status == Approval.Status.EXPIRED:
            found[approval.call_id] = (
                f"Error: the user declined {call}: no answer came within {timeout} "
                f"second{'s' if timeout != 1 else ''}, so it did not run."
            )
        else:
            found[approval.call_id] = (
                f"Error: the user declined {call}; it did not run. Do not run it another way "
                "unless they ask."
            )
    return found


def carried_approvals(
    *, session: Session, run: Run, skill_tools: Iterable[str] = ()
) -> tuple[str, ...]:
    """What waits for a person in `run`'s turn of `session` beyond what every turn of its
    owner gets anyway (`AGENT_APPROVE_TOOLS` and the owner's own, read again for each turn):
    the session's, the offered skills' (`skill_tools`), and what the run carries from the
    turn that started it. The turn hands these on to whatever it starts.

    The tools the session answered "always" are among them all the same: that answer was
    a person's yes to the calls of a conversation they follow, made in front of them. A
    sub-agent or a job runs out of their sight, later, on a task in the agent's own words,
    where no call of it could have been the one they agreed to."""
    return tuple(
        dict.fromkeys(
            [
                *tool_patterns.parse(session.approve_tools),
                *skill_tools,
                *tool_patterns.parse(run.approve_tools),
            ]
        )
    )


async def gate_for(
    *,
    conf: AgentSettings,
    session: Session,
    owner_id: int | None,
    carried: Iterable[str],
    profile: Profile,
    asks: bool = True,
) -> Gate | None:
    """Which tools of the turn wait for a person; None when none does. `carried`: what
    waits in it besides the operator's and the owner's (`carried_approvals`). Without
    `asks` (a turn whose client brings a conversation of its own, which a turn that goes on
    after a wait could not carry), such a call is refused as in a turn of no one's."""
    users = await store.user_approve_tools(user_id=owner_id) if owner_id is not None else ()
    patterns = {*conf.approve_tools, *users, *carried}
    if not patterns:
        return None
    allowed = tool_patterns.parse(session.allowed_tools)

    def needed(name: str) -> bool:
        return tool_patterns.matches(name, patterns) and not tool_patterns.matches(name, allowed)

    if profile.asks and asks:
        return Gate(needed)
    return Gate(needed, refusal=lambda name: NO_ONE_TO_ASK.format(name=name))


def request_of(approval: Approval) -> ApprovalRequest:
    return ApprovalRequest(
        id=approval.call_id,
        run_id=str(approval.run_id),
        name=approval.name,
        arguments=approval.arguments,
        answerable_by=answerable_by(approval),
    )


def resolved(approval: Approval, reason: str = "answered") -> ApprovalResolved:
    return ApprovalResolved(
        id=approval.call_id,
        run_id=str(approval.run_id),
        allow=approval.status == Approval.Status.ALLOWED,
        reason=reason,
        always=True if approval.always else None,
    )


async def answer_approval(
    *,
    owner: User | None,
    call_id: str,
    allow: bool,
    always: bool = False,
    run_id: UUID | None = None,
    session_id: int | None = None,
) -> Answer:
    """Answer the call `call_id` that waits in `owner`'s run `run_id` (or one of a chat of
    their team's), or in the session `session_id` (which the caller knows to be theirs);
    every socket of the session hears of it. ApprovalNotFound or ApprovalClosed, changing
    nothing, for a call that is not theirs or no longer waits; ApprovalRefused for one of a
    team chat that waits for another member's answer (`answerers`)."""
    run: Run | None
    if run_id is not None:
        run = await store.get_run(run_id=run_id)
        if run is not None and not await _reaches(run, owner):
            run = None  # another user's, or (with no owner) a user's and not the terminal's
    elif session_id is not None:
        approval = await store.approval_in_session(session_id=session_id, call_id=call_id)
        run = approval.run if approval is not None else None
    else:
        raise ValueError("answer a call of a run or of a session")
    if run is None:
        raise ApprovalNotFound(f"no call {call_id!r} waits for an answer here")
    await refuse_unless_answerer(run, owner)
    try:
        answered = await store.answer_call(
            run=run, call_id=call_id, allow=allow, always=always, user=owner
        )
    except NotFound as exc:
        raise ApprovalNotFound(str(exc)) from None
    except Closed as exc:
        raise ApprovalClosed(str(exc)) from None
    for approval in (answered.approval, *answered.also):
        await publish(run.session_id, resolved(approval))
    if answered.approval.always:
        tools = await store.allowed_tools(session_id=run.session_id)
        await publish(run.session_id, AllowedTools(tools=tools))
    return Answer(run.pk, run.session_id, answered.ready)


async def _reaches(run: Run, user: User | None) -> bool:
    """Whether `user` reaches the session of `run` (loaded with it): their own, or a chat of
    a team they belong to."""
    if run.session.team_id is not None:
        user_id = user.pk if user is not None else None
        return await store.is_member(user_id=user_id, team_id=run.session.team_id)
    return run.session.owner_id == (user.pk if user is not None else None)


async def forget_always(*, session_id: int, tool: str) -> list[str]:
    """Take back an "always" of the session (which the caller knows to be theirs): calls
    of `tool` wait for a person again from its next turn on (a turn that runs keeps the
    gate it started with). Every socket of the session hears the tools still allowed."""
    tools = await store.forget_allowed_tool(session_id=session_id, name=tool)
    if tools is None:
        raise SessionGone()
    await publish(session_id, AllowedTools(tools=tools))
    return tools


async def pending_requests(*, session_id: int) -> list[ApprovalRequest]:
    """What the session's waiting turns ask, as a socket that opens is shown it."""
    return [request_of(a) for a in await store.pending_approvals(session_id=session_id)]


async def end_waiting(
    *, reason: str, session_id: int | None = None, run_id: UUID | None = None
) -> list[Cancelled]:
    """End the session's waiting turns, or the run `run_id` if it waits, as cancelled:
    `reason` is `stopped` (by `/stop` or a cancel) or `superseded` (a new turn came
    first). Every socket of the session hears that their calls are answered."""
    result = SUPERSEDED_RESULT if reason == "superseded" else STOPPED_RESULT
    error = "a new message came first" if reason == "superseded" else "stopped by the user"
    ended = await store.cancel_waiting(
        result=result, error=error, session_id=session_id, run_id=run_id
    )
    for run in ended:
        await _announce(run.session_id, str(run.run_id), run.call_ids, reason)
    return ended


async def _announce(session_id: int, run_id: str, call_ids: Sequence[str], reason: str) -> None:
    for call_id in call_ids:
        event = ApprovalResolved(id=call_id, run_id=run_id, allow=False, reason=reason)
        await publish(session_id, event)


async def settle_approvals(*, idle_for: timedelta = RESUME_AFTER) -> list[UUID]:
    """The sweep's part: the calls whose time is up count as declined (their sessions
    hear of it), and the waiting runs that may go on and that no door took in hand are
    returned, for the worker to resume."""
    expired = await store.expire_overdue()
    for approval in expired:
        await publish(approval.run.session_id, resolved(approval, "timeout"))
    if expired:
        logger.info("%d call(s) waited past their time and count as declined", len(expired))
    return await store.take_runs_to_resume(
        idle_for=idle_for, also=[approval.run_id for approval in expired]
    )
