"""Reads and writes of memory: the owner's long-term memory, and summaries of a session's
history written when its oldest part is consolidated (or archived by /new)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from sessions_app.models import Memory, Message, Session

CONSOLIDATION_LEASE_SECONDS = 600


class MemoryTaken(Exception):
    """The owner already has a long-term memory: update that one."""


# ---- reads ------------------------------------------------------------------------------


def long_term_memory(*, owner_id: int | None, team_id: int | None = None) -> str:
    """A person's long-term memory, or with `team_id`, the team's."""
    memory = Memory.objects.filter(owner_id=owner_id, team_id=team_id, session__isnull=True)
    found = memory.first()
    return found.content if found is not None else ""


def latest_summary(*, session_id: int) -> str:
    """The newest summary of the live conversation's consolidated part; none after /new,
    whose archive belongs to the conversation it ended."""
    live = Message.objects.filter(
        session_id=session_id, archived=False, id__lte=F("session__last_consolidated")
    )
    if not live.exists():
        return ""
    memory = Memory.objects.filter(session_id=session_id).order_by("-id").first()
    return memory.content if memory is not None else ""


def unconsolidated(*, session_id: int) -> QuerySet[Message]:
    """The session's live messages not yet summarised into memory, oldest first."""
    return Message.objects.filter(
        session_id=session_id, archived=False, id__gt=F("session__last_consolidated")
    ).order_by("id")


def list_memories(*, owner: Any) -> QuerySet[Memory]:
    return Memory.objects.filter(owner=owner).select_related("session")


def find_memory(*, memory_id: int, owner: Any) -> Memory | None:
    return Memory.objects.filter(pk=memory_id, owner=owner).select_related("session").first()


# ---- writes -----------------------------------------------------------------------------


def claim_consolidation(*, session_id: int) -> datetime | None:
    """Take the session's consolidation lease: its expiry, which `release_consolidation`
    needs; None while another holds it."""
    now = timezone.now()
    free = Q(consolidating_until__isnull=True) | Q(consolidating_until__lt=now)
    until = now + timedelta(seconds=CONSOLIDATION_LEASE_SECONDS)
    taken = Session.objects.filter(free, pk=session_id).update(consolidating_until=until)
    return until if taken else None


def release_consolidation(*, session_id: int, lease: datetime) -> None:
    """Give the lease back, unless it expired and someone else holds it now."""
    Session.objects.filter(pk=session_id, consolidating_until=lease).update(
        consolidating_until=None
    )


@transaction.atomic
def save_consolidation(
    *, session_id: int, upto: int, history_entry: str, memory_update: str | None
) -> Memory | None:
    """Record the summary of the session's messages up to id `upto`, replace the owner's
    long-term memory with `memory_update` (None keeps it), and mark those messages
    consolidated. None if the session was deleted meanwhile."""
    session = Session.objects.select_for_update().filter(pk=session_id).first()
    if session is None:
        return None
    entry = Memory.objects.create(
        owner_id=session.owner_id, team_id=session.team_id, session=session, content=history_entry
    )
    if memory_update is not None:
        set_long_term_memory(
            owner_id=session.owner_id, team_id=session.team_id, content=memory_update
        )
    if upto > session.last_consolidated:
        Session.objects.filter(pk=session_id).update(last_consolidated=upto)
    return entry


@transaction.atomic
def set_long_term_memory(
    *, owner_id: int | None, content: str, team_id: int | None = None
) -> Memory:
    memory = Memory.objects.select_for_update().filter(
        owner_id=owner_id, team_id=team_id, session__isnull=True
    )
    found = memory.first()
    if found is None:
        return Memory.objects.create(owner_id=owner_id, team_id=team_id, content=content)
    found.content = content
    found.save(update_fields=["content", "updated"])
    return found


@transaction.atomic
def create_memory(*, owner: Any, session: Session | None, content: str) -> Memory:
    own = Memory.objects.filter(owner=owner, team__isnull=True, session__isnull=True)
    if session is None and own.exists():
        raise MemoryTaken()
    return Memory.objects.create(owner=owner, session=session, content=content)


def update_memory(*, memory: Memory, content: str) -> Memory:
    memory.content = content
    memory.save(update_fields=["content", "updated"])
    return memory


def delete_memory(*, memory: Memory) -> None:
    memory.delete()
