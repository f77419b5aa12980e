"""What the admin's session, message and run pages show of a session beyond its fields: a
link that opens it on the chat page; and long text and times made short, to fit a list's
column.

The chat page shows a person their own chats only, so a session opens there for its owner;
anyone else's session gets no link, rather than one that leads to a refusal.
"""

from __future__ import annotations

from datetime import datetime

from django.db.models import BooleanField, ExpressionWrapper, Q
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.text import Truncator

from sessions_app import keys

NONE = "-"  # the admin's own mark for an empty value


def viewer_owns(request_user_id: int | None, owner_field: str = "owner") -> ExpressionWrapper:
    """An annotation: whether the row's session belongs to the person viewing the page."""
    return ExpressionWrapper(
        Q(**{f"{owner_field}_id": request_user_id}) if request_user_id else Q(pk__in=[]),
        output_field=BooleanField(),
    )


def chat_url(key: str) -> str | None:
    """The chat page of session `key`; None for a session no person opens (`cli:`, `cron:`,
    the heartbeat's, a sub-agent's)."""
    if not keys.is_user_key(key):
        return None
    return reverse("chat-session", args=[key])


def chat_link(key: str, mine: bool) -> str:
    """A link "Open in chat" for a session of the viewer's that the chat page shows; a
    dash otherwise."""
    url = chat_url(key) if mine else None
    if url is None:
        return NONE
    return format_html('<a class="open-in-chat" href="{}">Open in chat</a>', url)


def clipped(text: str | None, limit: int) -> SafeString | str:
    """`text` cut to `limit` characters for a list's column; the whole of it on hover."""
    text = text or ""
    short = Truncator(text).chars(limit)
    if short == text:
        return text
    return format_html('<span class="clipped" title="{}">{}</span>', text, short)


def when(moment: datetime | None) -> str:
    """A time in a list's column, short: "2026-03-12 14:05" (the admin's own format takes
    half as much room again, and does not wrap)."""
    if moment is None:
        return NONE
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M")
