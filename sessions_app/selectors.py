"""Reads of sessions and their messages."""

from __future__ import annotations

from typing import Any

from sessions_app.models import Message, Session


def recent_messages(*, session: Session, limit: int) -> list[dict[str, Any]]:
    """The session's last `limit` live messages, oldest first, in the model's format."""
    if limit <= 0:
        return []
    rows = list(Message.objects.filter(session=session, archived=False).order_by("-id")[:limit])
    return [row.as_llm_message() for row in reversed(rows)]


def find_session(*, key: str) -> Session | None:
    return Session.objects.filter(key=key).first()
