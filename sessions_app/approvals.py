"""Tool calls that wait for a person: the writes and reads of `Approval`, and of the runs
that wait on them.

A turn whose model asks for such a tool is parked: its run is left `waiting`, one row per
call that waits, and no process holds it. Each call is answered once (a conditional update
of its row); once none is pending, whoever claims the run first (`resume_run`, another
conditional update) runs the rest of the turn. A call nobody answers in time expires, and
a stop, or a new turn of the session, cancels the lot and ends the run.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from copy import copy
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, NamedTuple
from uuid import UUID

from auditlog.diff import model_instance_diff
from auditlog.models import LogEntry
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Max, Q, QuerySet
from django.utils import timezone

from sessions_app import holds, services
from sessions_app import usage as ledger
from sessions_app.models import Approval, Message, Run, Session, UserPreferences

STOPPED_TEXT = "Stopped."


class PendingCall(NamedTuple):
    """A call of the model's answer that waits for a person."""

    call_id: str
    name: str
    arguments: Any
    position: int


class ApprovalNotFound(Exception):
    """No such call waits, or ever waited, in that run or session."""


class ApprovalClosed(Exception):
    """The call was answered already, or its run no longer waits; the text says which."""


@dataclass
class Answered:
    approval: Approval
    # The run's other calls of the same tool that an "always" allowed with it.
    also: list[Approval] = field(default_factory=list)
    # Whether none of the run's calls waits any more: its turn can go on.
    ready: bool = False


@dataclass
class Cancelled:
    run_id: UUID
    session_id: int
    # The calls that were still waiting for an answer.
    call_ids: list[str]


@transaction.atomic
def park_run(
    *,
    run: Run,
    pending: Sequence[PendingCall],
    timeout: int,
    stopped_result: str,
    iterations: int,
    tools_used: list[str],
    usage: dict[str, int],
    cost: float | None,
    messages: Sequence[services.NewMessage] = (),
    trace: list[dict[str, Any]] | None = None,
) -> list[Approval] | None:
    """Leave the running `run` waiting for answers to `pending`, each for `timeout`
    seconds, after saving its last `messages`; what it did so far is recorded as
    `finish_run` records it (its `trace` too, when given). None when it was asked to stop
    meanwhile (it ends cancelled, each call without a result answered `stopped_result`) or
    is gone."""
    if messages:
        services.add_messages(session=run.session, run=run, messages=messages)
    now = timezone.now()
    fields: dict[str, Any] = {
        "status": Run.Status.WAITING,
        "iterations": iterations,
        "tools_used": tools_used,
        "usage": usage,
        "cost": Decimal(str(round(cost, 6))) if cost is not None else None,
        # Since when it waits; the sweep's `take_runs_to_resume` reads it.
        "last_alive": now,
    }
    if trace is not None:
        fields["trace"] = trace
    if not Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(**fields):
        return None
    for name, value in fields.items():
        setattr(run, name, value)
    deadline = now + timedelta(seconds=timeout)
    # What it cost so far counts while it waits, however long a person takes.
    holds.keep(hold_ids=[run.pk], until=deadline + timedelta(seconds=holds.HOLD_SECONDS))
    approvals = Approval.objects.bulk_create(
        Approval(
            run=run,
            call_id=call.call_id,
            name=call.name,
            arguments=call.arguments,
            position=call.position,
            deadline=deadline,
        )
        for call in pending
    )
    if Run.objects.filter(pk=run.pk, cancel_requested=True).exists():
        # A stop that came as it began to wait, which no process would see any more.
        cancel_waiting(result=stopped_result, error="stopped by the user", run_id=run.pk)
        return None
    _load_answerers(run)
    return approvals


def _load_answerers(run: Run) -> None:
    """Load what says who may answer the run's calls (its session, and in a team chat its
    author), which async code reads off the approvals without a query."""
    team_chat = run.session.team_id is not None
    if team_chat and run.author_id is not None and not Run.author.is_cached(run):
        run.author = User.objects.filter(pk=run.author_id).first()


@transaction.atomic
def answer(
    *, run: Run, call_id: str, allow: bool, always: bool = False, user: User | None = None
) -> Answered:
    """Answer the call `call_id` of the waiting `run`: allowed or declined; `always` (with
    `allow`) allows its tool for the rest of the session, the run's other calls of it too.
    ApprovalNotFound or ApprovalClosed, changing nothing, for a call that is not there or
    no longer waits."""
    locked = Run.objects.select_for_update().filter(pk=run.pk).first()
    approval = Approval.objects.filter(run=run, call_id=call_id).first()
    if locked is None or approval is None:
        raise ApprovalNotFound(f"no call {call_id!r} waits for an answer in this task")
    if approval.status != Approval.Status.PENDING:
        raise ApprovalClosed(f"the call {call_id!r} was already answered ({approval.status})")
    if locked.status != Run.Status.WAITING:
        raise ApprovalClosed(f"the task is no longer waiting for an answer ({locked.status})")
    now = timezone.now()
    always = always and allow
    answer_fields: dict[str, Any] = {
        "status": Approval.Status.ALLOWED if allow else Approval.Status.DECLINED,
        "answered": now,
        "answered_by": user,
    }
    pending = Approval.objects.filter(run=run, status=Approval.Status.PENDING)
    if not pending.filter(pk=approval.pk).update(always=always, **answer_fields):
        raise ApprovalClosed(f"the call {call_id!r} was already answered")
    answered = [(copy(approval), approval)]
    for name, value in answer_fields.items():
        setattr(approval, name, value)
    approval.always = always
    also: list[Approval] = []
    if always:
        allow_in_session(session_id=run.session_id, name=approval.name)
        same = pending.filter(name=approval.name)
        also = list(same)
        same.update(**answer_fields)
        for other in also:
            answered.append((copy(other), other))
            for name, value in answer_fields.items():
                setattr(other, name, value)
    _log_answers(answered, user)
    # Taken in hand: the door that answered resumes it; the sweep leaves it a while.
    Run.objects.filter(pk=run.pk).update(last_alive=now)
    return Answered(approval, also, ready=not pending.exists())


def _log_answers(answered: list[tuple[Approval, Approval]], user: User | None) -> None:
    """Each answer in the audit log, with who gave it: a conditional update sends no
    signal for django-auditlog to see, and an answer through the WebSocket comes with no
    request whose user its middleware could name."""
    for before, after in answered:
        changes = model_instance_diff(before, after)
        if changes:
            LogEntry.objects.log_create(
                after, action=LogEntry.Action.UPDATE, changes=changes, actor=user
            )


def allow_in_session(*, session_id: int, name: str) -> None:
    """The tool `name` no longer waits for a person in the session."""
    session = Session.objects.select_for_update().filter(pk=session_id).first()
    if session is not None and name not in session.allowed_tools:
        session.allowed_tools = [*session.allowed_tools, name]
        session.save(update_fields=["allowed_tools"])


@transaction.atomic
def expire_overdue(*, now: datetime | None = None) -> list[Approval]:
    """The pending calls whose time is up, marked expired; each run left with no call
    pending is taken in hand (`take_runs_to_resume` leaves it alone a while)."""
    now = now or timezone.now()
    overdue = Approval.objects.select_for_update(of=("self",)).filter(
        status=Approval.Status.PENDING, deadline__lte=now
    )
    rows = list(overdue.select_related("run"))
    Approval.objects.filter(pk__in=[row.pk for row in rows]).update(
        status=Approval.Status.EXPIRED, answered=now
    )
    for row in rows:
        row.status, row.answered = Approval.Status.EXPIRED, now
    Run.objects.filter(pk__in={row.run_id for row in rows}).update(last_alive=now)
    return rows


@transaction.atomic
def take_runs_to_resume(
    *, idle_for: timedelta, now: datetime | None = None, also: Sequence[UUID] = ()
) -> list[UUID]:
    """The waiting runs none of whose calls waits any more, and which no one took in hand
    for `idle_for` (the door that answered resumes its run itself, unless it died first),
    with those of `also` that are ready; each is marked taken now, so that a sweep queues
    it once per `idle_for`."""
    now = now or timezone.now()
    idle = Q(last_alive__lt=now - idle_for) | Q(last_alive__isnull=True) | Q(pk__in=list(also))
    ready = (
        Run.objects.select_for_update()
        .filter(idle, status=Run.Status.WAITING)
        .exclude(approvals__status=Approval.Status.PENDING)
    )
    ids = list(ready.values_list("pk", flat=True))
    Run.objects.filter(pk__in=ids).update(last_alive=now)
    return ids


@transaction.atomic
def resume_run(*, run_id: UUID) -> Run | None:
    """Move the waiting run, none of whose calls waits any more, to running, its session's
    current turn; None when it is not (any more) ready: another process took it, it was
    stopped, or a call still waits."""
    run = (
        Run.objects.select_for_update(of=("self",))
        .select_related("session", "session__owner")
        .filter(pk=run_id, status=Run.Status.WAITING)
        .first()
    )
    if run is None or run.approvals.filter(status=Approval.Status.PENDING).exists():
        return None
    now = timezone.now()
    if not Run.objects.filter(pk=run_id, status=Run.Status.WAITING).update(
        status=Run.Status.RUNNING, last_alive=now
    ):
        return None
    run.status, run.last_alive = Run.Status.RUNNING, now
    Session.objects.filter(pk=run.session_id).update(turn=run.pk)
    run.session.turn = run.pk
    return run


def cancel_waiting(
    *,
    result: str,
    error: str,
    session_id: int | None = None,
    run_id: UUID | None = None,
) -> list[Cancelled]:
    """End the waiting runs of the session (and the sub-agents it started), or the run
    `run_id`, as cancelled: their pending calls are cancelled, and each call of theirs
    that has no result gets `result`, so that the history stays whole."""
    # Every turn asks this before it starts, and almost always nothing waits anywhere: the
    # simplest read answers that, without the write transaction (on SQLite, the database's
    # one writer) or the conditions, which cost the ORM more than the query costs SQLite.
    waiting = Run.objects.filter(status=Run.Status.WAITING)
    if not waiting.exists():
        return []
    if session_id is not None:
        waiting = waiting.filter(Q(session_id=session_id) | Q(parent_id=session_id))
    if run_id is not None:
        waiting = waiting.filter(pk=run_id)
    return _cancel(waiting, result=result, error=error)


@transaction.atomic
def _cancel(waiting: QuerySet[Run], *, result: str, error: str) -> list[Cancelled]:
    waiting = waiting.select_for_update(of=("self",)).select_related("session")
    now = timezone.now()
    ended = []
    for run in waiting:
        pending = run.approvals.filter(status=Approval.Status.PENDING)
        call_ids = list(pending.values_list("call_id", flat=True))
        pending.update(status=Approval.Status.CANCELLED, answered=now)
        _answer_the_rest(run, result)
        Run.objects.filter(pk=run.pk).update(
            status=Run.Status.CANCELLED,
            text=STOPPED_TEXT,
            error=error,
            finished=now,
            cancel_requested=True,
        )
        # What it used before it waited goes into the daily ledger, as a run's ending does.
        if Run.objects.filter(pk=run.pk, counted=False).update(counted=True):
            # Whose spending it is: its author's (a team chat's sender's), as `finish_run`.
            ledger.record_run(run=run, owner_id=run.author_id or run.session.owner_id)
        ended.append(Cancelled(run.pk, run.session_id, call_ids))
    return ended


def _answer_the_rest(run: Run, result: str) -> None:
    last = run.messages.aggregate(last=Max("seq"))["last"] or 0
    Message.objects.bulk_create(
        (
            Message(
                session_id=run.session_id,
                run=run,
                seq=last + number,
                role=Message.Role.TOOL,
                content=result,
                tool_call_id=call["id"],
                name=call.get("function", {}).get("name", ""),
            )
            for number, call in enumerate(unanswered_calls(run_id=run.pk), start=1)
        ),
        ignore_conflicts=True,
    )


# Reads.


def unanswered_calls(*, run_id: UUID) -> list[dict[str, Any]]:
    """The calls (as the provider sent them) of the run's last answer with tool calls that
    have no result saved yet, in order."""
    messages = list(Message.objects.filter(run_id=run_id).order_by("seq", "id"))
    asking = [m for m in messages if m.role == Message.Role.ASSISTANT and m.tool_calls]
    if not asking:
        return []
    last = asking[-1]
    answered = {m.tool_call_id for m in messages if m.role == Message.Role.TOOL and m.pk > last.pk}
    return [call for call in last.tool_calls or [] if call.get("id") not in answered]


def run_messages(*, run_id: UUID) -> list[Message]:
    """The run's saved messages in the order its turn made them."""
    return list(Message.objects.filter(run_id=run_id).order_by("seq", "id"))


def answers_of(*, run_id: UUID) -> list[Approval]:
    """The run's calls that waited, each as it was answered, in order."""
    return list(Approval.objects.filter(run_id=run_id).order_by("created", "position"))


def anything_pending() -> bool:
    """Whether any call anywhere waits for an answer: a read cheaper than finding whose."""
    return Approval.objects.filter(status=Approval.Status.PENDING).exists()


def pending_approvals(
    *,
    session_id: int | None = None,
    run_id: UUID | None = None,
    owner: Any = None,
    admin_of: Collection[int] = (),
) -> QuerySet[Approval]:
    """The calls waiting for an answer: of a session, of a run, or that `owner` may answer
    (those of their own sessions, and of the chats of the teams they belong to, the turns
    they started, or any turn where the team is one of `admin_of`, the groups of the teams
    they administer); oldest first."""
    pending = Approval.objects.filter(
        status=Approval.Status.PENDING, run__status=Run.Status.WAITING
    ).select_related("run", "run__session", "run__author")
    if session_id is not None:
        pending = pending.filter(run__session_id=session_id)
    if run_id is not None:
        pending = pending.filter(run_id=run_id)
    if owner is not None:
        team_chat = Q(run__session__owner__isnull=True, run__session__team__user=owner)
        answerable = Q(run__author=owner) | Q(run__session__team_id__in=list(admin_of))
        pending = pending.filter(Q(run__session__owner=owner) | (team_chat & answerable))
    return pending.order_by("created", "position")


def approval_in_session(*, session_id: int, call_id: str) -> Approval | None:
    """The session's call `call_id` that waited for an answer, the latest if calls of
    several runs had that id; its run comes with the run's session and author."""
    return (
        Approval.objects.select_related("run", "run__session", "run__author")
        .filter(run__session_id=session_id, call_id=call_id)
        .order_by("-created")
        .first()
    )


def user_approve_tools(*, user_id: int | None) -> list[str]:
    """What the user adds to the tools that wait for a person."""
    if user_id is None:
        return []
    found = UserPreferences.objects.filter(user_id=user_id).values_list("approve_tools", flat=True)
    return list(found.first() or [])


# Writes of what users and sessions add.


def heartbeat_limits(*, user_id: int) -> tuple[list[str] | None, list[str]]:
    """The tools the user's heartbeat may use (None: every tool) and those it refuses, as
    the turn that last wrote their HEARTBEAT.md was limited."""
    found = (
        UserPreferences.objects.filter(user_id=user_id)
        .values_list("heartbeat_tools", "heartbeat_approve_tools")
        .first()
    )
    if found is None:
        return None, []
    tools, approve = found
    return (list(tools) if isinstance(tools, list) else None), list(approve or [])


def set_heartbeat_limits(
    *, user_id: int, tools: list[str] | None, approve_tools: list[str]
) -> None:
    """Record the limits of the turn that wrote the user's HEARTBEAT.md."""
    UserPreferences.objects.update_or_create(
        user_id=user_id,
        defaults={"heartbeat_tools": tools, "heartbeat_approve_tools": approve_tools},
    )


def set_user_approve_tools(*, user: User, tools: list[str]) -> UserPreferences:
    preferences, _ = UserPreferences.objects.update_or_create(
        user=user, defaults={"approve_tools": tools}
    )
    return preferences
