"""Writes and reads of what the OpenAI door keeps of its clients' conversations: the
session a conversation continues, by the digest of its messages, and the Responses API's
answers."""

from __future__ import annotations

import contextlib
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
    answer wins: a conversation forked in the client goes on where it was last answered).
    One statement, an upsert: it is made after every answer."""
    mark = ConversationMark(owner_id=owner_id, digest=digest, session_id=session_id)
    # A session deleted meanwhile leaves nothing to continue.
    with contextlib.suppress(IntegrityError):
        ConversationMark.objects.bulk_create(
            [mark],
            update_conflicts=True,
            unique_fields=["owner", "digest"],
            update_fields=["session"],
        )


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
