"""Writes and reads of what the OpenAI door keeps of its clients' conversations: the
session a conversation continues, by the digest of its messages, and the Responses API's
answers."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from sessions_app.models import ConversationMark, Session, StoredResponse


def conversation_session(*, owner_id: int, digest: str) -> Session | None:
    mark = (
        ConversationMark.objects.filter(owner_id=owner_id, digest=digest)
        .select_related("session")
        .first()
    )
    return mark.session if mark is not None else None


def mark_conversation(*, owner_id: int, digest: str, session_id: int) -> None:
    """The conversation `digest` continues session `session_id` from now on (the latest
    answer wins: a conversation forked in the client goes on where it was last answered)."""
    try:
        with transaction.atomic():
            ConversationMark.objects.update_or_create(
                owner_id=owner_id, digest=digest, defaults={"session_id": session_id}
            )
    except IntegrityError:  # the session was deleted meanwhile: nothing to continue
        pass


def keep_response(
    *, response_id: str, owner_id: int, session_id: int, prompt: str, body: dict[str, Any]
) -> None:
    try:
        with transaction.atomic():
            StoredResponse.objects.update_or_create(
                id=response_id,
                defaults={
                    "owner_id": owner_id,
                    "session_id": session_id,
                    "prompt": prompt,
                    "body": body,
                },
            )
    except IntegrityError:  # its session was deleted meanwhile: the answer goes with it
        pass


def stored_response(*, response_id: str, owner_id: int) -> StoredResponse | None:
    return (
        StoredResponse.objects.filter(id=response_id, owner_id=owner_id)
        .select_related("session")
        .first()
    )
