"""Writes to sessions, messages and run records. Keyword-only, each one transaction.

A session can be deleted while one of its turns runs (through the API, the admin, or with
its owner). The writes a turn makes then raise `SessionDeleted` instead of an integrity
error, and the run's last write quietly finds nothing to update.

A turn that started under the session's lock is the session's current turn (`Session.turn`)
until the next one starts. Its messages are saved only while it still is: one that lost the
lock (its database connection was dropped) and was overtaken gets `TurnSuperseded`, so that
two turns' messages never interleave.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from datetime import timedelta
from decimal import Decimal
from typing import Any, NamedTuple
from uuid import UUID

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from sessions_app import holds
from sessions_app import usage as ledger
from sessions_app.keys import split_key
from sessions_app.models import STALE_AFTER_SECONDS, Message, Relayed, Run, Session

TITLE_LENGTH = 60
DIED_ERROR = "the process running this turn stopped before it finished"
LOST_ERROR = "no worker started it; the one that took it may have stopped"
# `Run.tools`: None (every tool), False (a direct generation) or the names allowed.
RunTools = bool | list[str] | None
# `Run.approve_tools`: what waited for a person in the turn that started the run.
Carried = Sequence[str]


class SessionDeleted(Exception):
    """The session was deleted while something was being written to it."""


class TurnSuperseded(Exception):
    """Another turn of the session started after this one, which must write nothing more."""


def get_or_create_session(*, key: str, owner: User | None = None) -> Session:
    """`owner`'s session `key` (the ownerless one for None), made if it is new."""
    channel, chat_id = split_key(key)
    session, _ = Session.objects.get_or_create(
        key=key, owner=owner, defaults={"channel": channel, "chat_id": chat_id}
    )
    return session


def _update_session(session: Session, **fields: Any) -> None:
    fields["updated"] = timezone.now()
    if not Session.objects.filter(pk=session.pk).update(**fields):
        raise SessionDeleted(session.key)
    for name, value in fields.items():
        setattr(session, name, value)


def _title_from(session: Session, prompt: str) -> None:
    if not session.title and prompt.strip():
        _update_session(session, title=" ".join(prompt.split())[:TITLE_LENGTH])


def _create(session: Session, table: type[Run] | type[Message], **fields: Any) -> Any:
    """Create a row of `session`; SessionDeleted if the session is gone.

    The session's row stays locked until the row is committed: a delete either came first
    (and is seen here) or waits, then takes the new row with it. Foreign keys alone would
    only complain at commit, on PostgreSQL after the caller's transaction.
    """
    with transaction.atomic(savepoint=False):  # inside a caller's transaction, no savepoint
        _lock_session(session)
        return table.objects.create(session=session, **fields)


def _lock_session(session: Session, *, turn: UUID | None = None) -> None:
    """Lock the session's row until the transaction ends; with `turn`, check that this run
    is still the session's current turn."""
    locked = Session.objects.select_for_update(no_key=True).filter(pk=session.pk)
    current = list(locked.values_list("turn", flat=True))
    if not current:
        raise SessionDeleted(session.key)
    if turn is not None and current[0] != turn:
        raise TurnSuperseded(f"run {turn} of {session.key} was superseded by run {current[0]}")


def _take_turn(session: Session, run: Run) -> None:
    """Make `run` the session's current turn (see `_lock_session`)."""
    Session.objects.filter(pk=session.pk).update(turn=run.pk)
    session.turn = run.pk


@transaction.atomic
def start_new_run(
    *, session: Session, channel: str, prompt: str, model: str, tools: RunTools = None
) -> Run:
    """The run of a turn that starts now, never queued: running, its session's current turn
    (`start_queued_run` starts one that was queued first). `tools`: see `Run.tools`."""
    _title_from(session, prompt)
    now = timezone.now()
    run: Run = _create(
        session,
        Run,
        channel=channel,
        prompt=prompt,
        model=model,
        tools=tools,
        status=Run.Status.RUNNING,
        started=now,
        last_alive=now,
    )
    _take_turn(session, run)
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
) -> Run:
    """A run that exists (and can be watched or cancelled) before its turn starts;
    `cron_job_id`: the job it runs for; `approve_tools`: see `Run.approve_tools`."""
    _title_from(session, prompt)
    run: Run = _create(
        session,
        Run,
        channel=channel,
        prompt=prompt,
        model=model,
        tools=tools,
        approve_tools=list(approve_tools),
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
) -> Run:
    """A sub-agent's run, queued in a session of its own (no history to share) that
    belongs to the parent's owner; `parent` hears how it ended. `parent_run_id`: the run
    whose turn started it; `tools`: the most it may use (a turn limited to some tools
    starts sub-agents limited to them too); `approve_tools`: what waited for a person in
    that turn, which the sub-agent, with no one to ask, is refused."""
    session = get_or_create_session(
        key=f"{SUBAGENT_CHANNEL}:{uuid.uuid4().hex[:12]}", owner=parent.owner
    )
    run: Run = _create(
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
        _take_turn(run.session, run)
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


def add_message(
    *,
    session: Session,
    message: dict[str, Any],
    run: Run | None = None,
    usage: dict[str, int] | None = None,
) -> Message:
    created: Message = _create(session, Message, run=run, **_message_fields(message, usage))
    return created


Usage = dict[str, int] | None


class NewMessage(NamedTuple):
    """A message as a turn hands it over: with its model call's usage, if any, and its
    number among the run's messages (`Message.seq`)."""

    message: dict[str, Any]
    usage: Usage = None
    seq: int | None = None


def add_messages(
    *,
    session: Session,
    run: Run | None,
    messages: Sequence[NewMessage],
    trace: list[dict[str, Any]] | None = None,
) -> None:
    """Save `messages` in order, in one transaction and one statement: a turn's writes
    under load come in batches. `trace`: the run's trace so far, saved with them.

    A message whose number the run already has is not saved again: a write run again after
    the reply to its commit was lost stores each message once. A run that is no longer its
    session's current turn saves nothing (`TurnSuperseded`).
    """
    with transaction.atomic(savepoint=False):
        _lock_session(session, turn=run.pk if run is not None else None)
        Message.objects.bulk_create(
            (
                Message(
                    session=session,
                    run=run,
                    seq=entry.seq if run is not None else None,
                    **_message_fields(entry.message, entry.usage),
                )
                for entry in messages
            ),
            ignore_conflicts=True,
        )
        if trace is not None and run is not None:
            Run.objects.filter(pk=run.pk).update(trace=trace)


def save_trace(*, run: Run, trace: list[dict[str, Any]]) -> None:
    """Record `run`'s trace so far (`Run.trace`), when no batch of messages took it."""
    Run.objects.filter(pk=run.pk).update(trace=trace)


def _message_fields(message: dict[str, Any], usage: Usage) -> dict[str, Any]:
    return {
        "role": message["role"],
        "content": message.get("content"),
        "tool_calls": message.get("tool_calls") or None,
        "tool_call_id": message.get("tool_call_id") or "",
        "name": message.get("name") or "",
        "reasoning_content": message.get("reasoning_content") or "",
        "usage": usage or None,
        "stopped": bool(message.get("stopped")),
    }


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
    if Run.session.is_cached(run):
        return run.session.owner_id
    return Session.objects.filter(pk=run.session_id).values_list("owner_id", flat=True).first()


def set_session_model(*, session: Session, model: str) -> Session:
    _update_session(session, model=model)
    return session


def rename_session(*, session: Session, title: str) -> Session:
    _update_session(session, title=title)
    return session


def set_session_tools(
    *,
    session: Session,
    approve_tools: list[str] | None = None,
    allowed_tools: list[str] | None = None,
) -> Session:
    """Change what the session adds to the tools that wait for a person (`approve_tools`),
    or the tools answered "always" in it (`allowed_tools`)."""
    fields: dict[str, Any] = {}
    if approve_tools is not None:
        fields["approve_tools"] = approve_tools
    if allowed_tools is not None:
        fields["allowed_tools"] = allowed_tools
    if fields:
        _update_session(session, **fields)
    return session


@transaction.atomic
def archive_messages(*, session: Session) -> int:
    """Take every message out of the conversation, keeping it on record."""
    count = session.messages.filter(archived=False).update(archived=True)
    _update_session(session, title="")
    return count


@transaction.atomic
def archive_from(*, session: Session, message_id: int) -> int:
    """Take message `message_id` and every message after it out of the conversation,
    keeping them on record, as `/new` does with all of them; how many. None (0) if that
    message is not in the live conversation (any more)."""
    _lock_session(session)
    live = session.messages.filter(archived=False)
    if not live.filter(pk=message_id).exists():
        return 0
    count = live.filter(pk__gte=message_id).update(archived=True)
    _update_session(session)
    return count


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
    runs = Run.objects.filter(session__owner_id=owner_id)
    unfinished = runs.filter(status__in=[Run.Status.QUEUED, Run.Status.RUNNING])
    asked, running = 0, []
    for session_id in sorted(set(unfinished.values_list("session_id", flat=True))):
        count, ids = request_stop(session_id=session_id)
        asked += count
        running += ids
    waiting = runs.filter(status=Run.Status.WAITING).values_list("session_id", flat=True)
    return UserStop(asked, running, sorted(set(waiting)))


@transaction.atomic
def delete_session(*, session: Session) -> None:
    """Delete the session with its messages and runs. A turn still running notices within
    a poll (its run is gone) and stops; `post_delete` tells its sockets.

    The session's row is locked first, as every write of a turn locks it: a turn's messages
    or run are then added either before, and go with it, or after, and find it gone. Else a
    message added between Django's look at what to delete and its delete of the session
    failed the delete, on PostgreSQL, with a foreign key violation."""
    _lock_session(session)
    session.delete()


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


def relay(*, session_id: int, message: dict[str, Any], origin: str) -> None:
    """Leave `message` for the web server to pass to the session's sockets; nothing if the
    session is gone."""
    if Session.objects.filter(pk=session_id).exists():
        Relayed.objects.create(session_id=session_id, message=message, origin=origin)


def prune_relayed(*, older_than: timedelta) -> int:
    return Relayed.objects.filter(created__lt=timezone.now() - older_than).delete()[0]
