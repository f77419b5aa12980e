"""Writes to sessions, messages and run records. Keyword-only, each one transaction."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from sessions_app.models import STALE_AFTER_SECONDS, Message, Run, Session

TITLE_LENGTH = 60


def split_key(key: str) -> tuple[str, str]:
    channel, _, chat_id = key.partition(":")
    return channel, chat_id or channel


def get_or_create_session(*, key: str, owner: User | None = None) -> Session:
    channel, chat_id = split_key(key)
    session, _ = Session.objects.get_or_create(
        key=key, defaults={"channel": channel, "chat_id": chat_id, "owner": owner}
    )
    return session


def _title_from(session: Session, prompt: str) -> None:
    if not session.title and prompt.strip():
        session.title = " ".join(prompt.split())[:TITLE_LENGTH]
        session.save(update_fields=["title", "updated"])


@transaction.atomic
def start_run(*, session: Session, channel: str, prompt: str, model: str) -> Run:
    _title_from(session, prompt)
    now = timezone.now()
    return Run.objects.create(
        session=session,
        channel=channel,
        prompt=prompt,
        model=model,
        status=Run.Status.RUNNING,
        started=now,
        heartbeat=now,
    )


@transaction.atomic
def queue_run(*, session: Session, channel: str, prompt: str, model: str) -> Run:
    """A run that exists (and can be watched or cancelled) before its turn starts."""
    _title_from(session, prompt)
    return Run.objects.create(
        session=session, channel=channel, prompt=prompt, model=model, status=Run.Status.QUEUED
    )


def begin_run(*, run_id: UUID, model: str) -> Run | None:
    """Move a queued run to running; None if it was cancelled (or taken) meanwhile."""
    now = timezone.now()
    started = Run.objects.filter(
        pk=run_id, status=Run.Status.QUEUED, cancel_requested=False
    ).update(status=Run.Status.RUNNING, started=now, heartbeat=now, model=model)
    return Run.objects.select_related("session").get(pk=run_id) if started else None


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
    return Message.objects.create(
        session=session,
        run=run,
        role=message["role"],
        content=message.get("content"),
        tool_calls=message.get("tool_calls") or None,
        tool_call_id=message.get("tool_call_id") or "",
        name=message.get("name") or "",
        reasoning_content=message.get("reasoning_content") or "",
        usage=usage or None,
    )


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
) -> Run:
    run.status = status
    run.text = text
    run.error = error
    run.iterations = iterations
    run.tools_used = tools_used or []
    run.usage = usage or {}
    run.cost = Decimal(str(round(cost, 6))) if cost is not None else None
    run.finished = timezone.now()
    run.save()
    Session.objects.filter(pk=run.session_id).update(updated=run.finished)
    return run


def set_session_model(*, session: Session, model: str) -> Session:
    session.model = model
    session.save(update_fields=["model", "updated"])
    return session


@transaction.atomic
def archive_messages(*, session: Session) -> int:
    """Take every message out of the conversation, keeping it on record."""
    count = session.messages.filter(archived=False).update(archived=True)
    session.title = ""
    session.save(update_fields=["title", "updated"])
    return count


@transaction.atomic
def request_stop(*, session_key: str, exclude: UUID | None = None) -> int:
    """Stop every unfinished run of the session: queued ones end here, running ones are
    asked to stop. How many there were."""
    runs = Run.objects.filter(session__key=session_key)
    if exclude is not None:
        runs = runs.exclude(pk=exclude)
    queued = runs.filter(status=Run.Status.QUEUED).update(
        status=Run.Status.CANCELLED,
        cancel_requested=True,
        text="Stopped.",
        error="cancelled before it started",
        finished=timezone.now(),
    )
    return queued + runs.filter(status=Run.Status.RUNNING).update(cancel_requested=True)


def claim_session(*, key: str, owner: User) -> Session | None:
    """The session for `owner`, created if new; None if it is somebody else's.

    Sessions without an owner (the command line's, scheduled jobs') are nobody's to claim.
    """
    session = get_or_create_session(key=key, owner=owner)
    return session if session.owner_id == owner.pk else None


def beat(*, run_id: UUID) -> None:
    Run.objects.filter(pk=run_id).update(heartbeat=timezone.now())


def fail_stale_runs() -> int:
    """Mark failed the runs whose process died mid-turn (their heartbeat stopped)."""
    cutoff = timezone.now() - timedelta(seconds=STALE_AFTER_SECONDS)
    return Run.objects.filter(status=Run.Status.RUNNING, heartbeat__lt=cutoff).update(
        status=Run.Status.FAILED,
        error="the process running this turn stopped before it finished",
        finished=timezone.now(),
    )
