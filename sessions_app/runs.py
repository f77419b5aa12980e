"""Writes to run records: a turn's run queued or started, stopped, ended, and the sweep of
the runs whose process died. Keyword-only, each one transaction.

A run deleted meanwhile (with its session) stays deleted: its last write finds nothing to
update. A run that starts under its session's lock becomes the session's current turn
(`sessions_app.services`, whose rules for writing to a session these writes follow).
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from datetime import timedelta
from decimal import Decimal
from typing import Any, NamedTuple
from uuid import UUID

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from sessions_app import holds
from sessions_app import usage as ledger
from sessions_app.models import STALE_AFTER_SECONDS, Run, Session
from sessions_app.services import (
    NewMessage,
    SessionDeleted,
    add_messages,
    create_row,
    get_or_create_session,
    take_turn,
    title_from,
)

DIED_ERROR = "the process running this turn stopped before it finished"
LOST_ERROR = "no worker started it; the one that took it may have stopped"
# `Run.tools`: None (every tool), False (a direct generation) or the names allowed.
RunTools = bool | list[str] | None
# `Run.approve_tools`: what waited for a person in the turn that started the run.
Carried = Sequence[str]


@transaction.atomic
def start_new_run(
    *,
    session: Session,
    channel: str,
    prompt: str,
    model: str,
    tools: RunTools = None,
    replaces: int | None = None,
    author_id: int | None = None,
) -> Run:
    """The run of a turn that starts now, never queued: running, its session's current turn
    (`start_queued_run` starts one that was queued first). `tools`: see `Run.tools`;
    `replaces`: the archived message of the user's that the turn says again (`Run.replaces`)."""
    title_from(session, prompt)
    now = timezone.now()
    run: Run = create_row(
        session,
        Run,
        channel=channel,
        prompt=prompt,
        model=model,
        tools=tools,
        replaces_id=replaces,
        author_id=author_id or session.owner_id,
        status=Run.Status.RUNNING,
        started=now,
        last_alive=now,
    )
    take_turn(session, run)
    return run


@transaction.atomic
def queue_run(
    *,
    session: Session,
    channel: str,
    prompt: str,
    model: str,
    cron_job_id: int | None = None,
    tools: RunTools = None,
    approve_tools: Carried = (),
    author_id: int | None = None,
) -> Run:
    """A run that exists (and can be watched or cancelled) before its turn starts;
    `cron_job_id`: the job it runs for; `approve_tools`: see `Run.approve_tools`;
    `author_id`: whose turn it is (by default the session's owner's)."""
    title_from(session, prompt)
    run: Run = create_row(
        session,
        Run,
        channel=channel,
        prompt=prompt,
        model=model,
        tools=tools,
        approve_tools=list(approve_tools),
        author_id=author_id or session.owner_id,
        status=Run.Status.QUEUED,
        cron_job_id=cron_job_id,
    )
    return run


@transaction.atomic
def queue_run_unless_busy(
    *,
    session: Session,
    channel: str,
    prompt: str,
    model: str,
    cron_job_id: int | None = None,
    tools: RunTools = None,
    approve_tools: Carried = (),
    author_id: int | None = None,
) -> Run | None:
    """A queued run, unless the session has one that has not ended (a scheduled job that
    is still running is not started again): then None."""
    if not Session.objects.select_for_update().filter(pk=session.pk).exists():
        raise SessionDeleted(session.key)
    busy = Run.objects.filter(
        session=session, status__in=[Run.Status.QUEUED, Run.Status.RUNNING]
    ).exists()
    if busy:
        return None
    return queue_run(
        session=session,
        channel=channel,
        prompt=prompt,
        model=model,
        cron_job_id=cron_job_id,
        tools=tools,
        approve_tools=approve_tools,
        author_id=author_id,
    )


SUBAGENT_CHANNEL = "subagent"


@transaction.atomic
def queue_subagent(
    *,
    parent: Session,
    task: str,
    label: str,
    model: str,
    parent_run_id: UUID | None = None,
    tools: RunTools = None,
    approve_tools: Carried = (),
    author_id: int | None = None,
) -> Run:
    """A sub-agent's run, queued in a session of its own (no history to share) that
    belongs to the parent's owner; `parent` hears how it ended. `parent_run_id`: the run
    whose turn started it; `tools`: the most it may use (a turn limited to some tools
    starts sub-agents limited to them too); `approve_tools`: what waited for a person in
    that turn, which the sub-agent, with no one to ask, is refused."""
    if parent.team_id is not None:
        # A team chat's sub-agent works in the team's folder, as the member whose turn
        # started it (`author_id`).
        chat_id = uuid.uuid4().hex[:12]
        session = Session.objects.create(
            key=f"{SUBAGENT_CHANNEL}:{chat_id}",
            channel=SUBAGENT_CHANNEL,
            chat_id=chat_id,
            team_id=parent.team_id,
        )
    else:
        session = get_or_create_session(
            key=f"{SUBAGENT_CHANNEL}:{uuid.uuid4().hex[:12]}", owner=parent.owner
        )
    run: Run = create_row(
        session,
        Run,
        channel=SUBAGENT_CHANNEL,
        prompt=task,
        model=model,
        tools=tools,
        approve_tools=list(approve_tools),
        status=Run.Status.QUEUED,
        parent=parent,
        parent_run_id=parent_run_id,
        label=label,
        author_id=author_id or parent.owner_id,
    )
    return run


@transaction.atomic
def start_queued_run(*, run_id: UUID, model: str) -> Run | None:
    """Move a queued run to running, its session's current turn; None if it was cancelled
    (or taken) meanwhile."""
    now = timezone.now()
    started = Run.objects.filter(
        pk=run_id, status=Run.Status.QUEUED, cancel_requested=False
    ).update(status=Run.Status.RUNNING, started=now, last_alive=now, model=model)
    run = Run.objects.select_related("session").filter(pk=run_id).first() if started else None
    if run is not None:
        take_turn(run.session, run)
    return run


@transaction.atomic
def cancel_run(*, run_id: UUID) -> Run:
    """Stop a run: a queued one ends here, a running one is asked to stop."""
    run = Run.objects.select_for_update().select_related("session").get(pk=run_id)
    if run.status == Run.Status.QUEUED:
        run.status = Run.Status.CANCELLED
        run.text = "Stopped."
        run.error = "cancelled before it started"
        run.finished = timezone.now()
        run.cancel_requested = True
        run.save()
    elif run.status == Run.Status.RUNNING:
        run.cancel_requested = True
        run.save(update_fields=["cancel_requested"])
    return run


@transaction.atomic
def finish_run(
    *,
    run: Run,
    status: str,
    text: str | None,
    error: str | None = None,
    iterations: int = 0,
    tools_used: list[str] | None = None,
    usage: dict[str, int] | None = None,
    cost: float | None = None,
    messages: Sequence[NewMessage] = (),
    trace: list[dict[str, Any]] | None = None,
    held: bool = True,
) -> Run:
    """Record how the run ended, after saving its last `messages` in the same transaction;
    with `trace`, its model calls and tool calls. What it cost goes into the daily ledger,
    and what it held of its owner's budget (`held`: it may have held some) goes with it.
    A run deleted meanwhile (with its session) stays deleted; its messages are not saved
    (SessionDeleted). Nor are they if another turn of the session has started since
    (TurnSuperseded), and the run is then left as it was."""
    if messages:
        add_messages(session=run.session, run=run, messages=messages)
    run.status = status
    run.text = text
    run.error = error
    run.iterations = iterations
    run.tools_used = tools_used or []
    run.usage = usage or {}
    run.cost = Decimal(str(round(cost, 6))) if cost is not None else None
    run.finished = timezone.now()
    fields = ["status", "text", "error", "iterations", "tools_used", "usage", "cost", "finished"]
    if trace is not None:
        run.trace = trace
        fields.append("trace")
    values = {name: getattr(run, name) for name in fields}
    # Its usage goes into the daily ledger once: not again when this write is made again.
    first = Run.objects.filter(pk=run.pk, counted=False).update(**values, counted=True)
    if first or Run.objects.filter(pk=run.pk).update(**values):
        Session.objects.filter(pk=run.session_id).update(updated=run.finished)
    else:
        first = 1  # deleted meanwhile, with its session: what it cost was spent all the same
    if first:
        ledger.record_run(run=run, owner_id=_owner_id(run), held=held)
    return run


def _owner_id(run: Run) -> int | None:
    """Whose spending a run is: its author's (a team chat's sender's), else its session's
    owner's."""
    if run.author_id is not None:
        return run.author_id
    if Run.session.is_cached(run):
        return run.session.owner_id
    return Session.objects.filter(pk=run.session_id).values_list("owner_id", flat=True).first()


@transaction.atomic
def request_stop(*, session_id: int, exclude: UUID | None = None) -> tuple[int, list[UUID]]:
    """Stop every unfinished run of the session: queued ones end here, running ones are
    asked to stop. How many there were, and the running ones, which the process running
    each is to be told of."""
    # The session's own turns and the sub-agents it started.
    runs = Run.objects.filter(Q(session_id=session_id) | Q(parent_id=session_id))
    if exclude is not None:
        runs = runs.exclude(pk=exclude)
    queued = runs.filter(status=Run.Status.QUEUED).update(
        status=Run.Status.CANCELLED,
        cancel_requested=True,
        text="Stopped.",
        error="cancelled before it started",
        finished=timezone.now(),
    )
    running = list(
        runs.filter(status=Run.Status.RUNNING).select_for_update().values_list("pk", flat=True)
    )
    Run.objects.filter(pk__in=running).update(cancel_requested=True)
    return queued + len(running), running


class UserStop(NamedTuple):
    """What `request_user_stop` found: how many runs it stopped or asked to stop, the
    running ones (whose processes are to be told), and the sessions whose turns wait for a
    person (which `agent.turn` ends, telling their sockets)."""

    asked: int
    running: list[UUID]
    waiting_sessions: list[int]


@transaction.atomic
def request_user_stop(*, owner_id: int) -> UserStop:
    """`request_stop` for every session of user `owner_id` (their sub-agents' sessions are
    theirs too): a deactivated user's work ends."""
    runs = Run.objects.filter(Q(session__owner_id=owner_id) | Q(author_id=owner_id))
    unfinished = runs.filter(status__in=[Run.Status.QUEUED, Run.Status.RUNNING])
    asked, running = 0, []
    for session_id in sorted(set(unfinished.values_list("session_id", flat=True))):
        count, ids = request_stop(session_id=session_id)
        asked += count
        running += ids
    waiting = runs.filter(status=Run.Status.WAITING).values_list("session_id", flat=True)
    return UserStop(asked, running, sorted(set(waiting)))


def mark_alive(*, run_ids: Collection[UUID]) -> None:
    """Say that these runs' process is alive (see `fail_dead_runs`). A run the sweep already
    takes for dead stays so: its process handed it back (`hand_back_runs`) or was away too
    long, and a mark still on its way must not bring it back."""
    now = timezone.now()
    alive = now - timedelta(seconds=STALE_AFTER_SECONDS)
    Run.objects.filter(pk__in=run_ids, last_alive__gte=alive).update(last_alive=now)
    holds.keep(hold_ids=run_ids, until=now + timedelta(seconds=holds.HOLD_SECONDS))


@transaction.atomic
def fail_dead_runs(*, unstarted_after: timedelta | None = None) -> list[UUID]:
    """Mark failed the runs whose process died mid-turn (no longer marked alive) and, with
    `unstarted_after`, those queued longer than that, which no worker will start any more
    (the one that took the task died with it); their ids. What the dead ones held of their
    owners' budgets goes, and so does every hold past its time."""
    now = timezone.now()
    dead = Run.objects.select_for_update().filter(
        status=Run.Status.RUNNING, last_alive__lt=now - timedelta(seconds=STALE_AFTER_SECONDS)
    )
    ids = list(dead.values_list("pk", flat=True))
    Run.objects.filter(pk__in=ids).update(
        status=Run.Status.FAILED,
        text=f"This turn stopped: {DIED_ERROR}.",
        error=DIED_ERROR,
        finished=now,
    )
    if unstarted_after is not None:
        lost = Run.objects.select_for_update().filter(
            status=Run.Status.QUEUED, created__lt=now - unstarted_after
        )
        lost_ids = list(lost.values_list("pk", flat=True))
        Run.objects.filter(pk__in=lost_ids).update(
            status=Run.Status.FAILED,
            text=f"This turn never started: {LOST_ERROR}.",
            error=LOST_ERROR,
            finished=now,
        )
        ids += lost_ids
    holds.release_dead(run_ids=ids)
    return ids


def hand_back_runs(*, run_ids: Collection[UUID]) -> int:
    """Leave these running turns to `fail_dead_runs` at once, as if their process had died a
    while ago: it is stopping and will not finish them. How many were still running."""
    long_ago = timezone.now() - timedelta(seconds=2 * STALE_AFTER_SECONDS)
    running = Run.objects.filter(pk__in=run_ids, status=Run.Status.RUNNING)
    return running.update(last_alive=long_ago)


def fail_unfinished_run(*, run_id: UUID, text: str, error: str) -> bool:
    """Mark the run failed unless it already ended; whether it was still unfinished."""
    unfinished = Run.objects.filter(pk=run_id, status__in=[Run.Status.QUEUED, Run.Status.RUNNING])
    return bool(
        unfinished.update(status=Run.Status.FAILED, text=text, error=error, finished=timezone.now())
    )
