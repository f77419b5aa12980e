"""Search through a user's conversations: the titles of their chats and the words of their
messages, in the sessions the chat page lists (`web:`, `api:`, `openai:`).

On PostgreSQL the words are matched by its full-text search (each word of the query as a
prefix, all of them required), ranked, and served by a GIN index over the messages' text
(migration 0014). Elsewhere (SQLite) each word must appear in the text, case aside, and the
newest messages come first. Either way only what a person reads in the chat is searched:
their own messages and the agent's replies, not tool output or the reports sub-agents make
to the agent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Q, QuerySet

from sessions_app.keys import USER_CHANNELS, is_user_key
from sessions_app.models import Message, Session

# A text search configuration that neither stems nor drops words: the conversations may be
# in any language, and a word a person typed is matched as they typed it (as a prefix).
TEXT_SEARCH_CONFIG = "simple"
# The roles the index covers and the search reads (the index's condition says the same).
SEARCHED_ROLES = ("user", "assistant")
# Sub-agents' reports to the agent are stored as user messages of a run of this channel
# (`agent.turn.subagents.SYSTEM_CHANNEL`); the chat shows them as notes, not words of anyone's.
REPORT_CHANNEL = "system"
MAX_QUERY_CHARS = 200
MAX_TERMS = 16
SNIPPET_CHARS = 160
# Sessions' keys are checked by the rule again after the query; a few more rows than asked
# for make up for any it drops.
_SPARE = 10
_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True, slots=True)
class Hit:
    """One result: a message that matched (or, with `message_id` None, a chat's title)."""

    session: str
    title: str
    message_id: int | None
    run_id: str | None
    role: str | None
    snippet: str
    created: datetime
    archived: bool


def terms_of(query: str) -> list[str]:
    """The words of `query` that the search matches, lower-cased, each once, in order."""
    return list(dict.fromkeys(word.lower() for word in _WORD.findall(query)))[:MAX_TERMS]


def search(*, owner: Any, query: str, limit: int, archived: bool = False) -> list[Hit]:
    """`owner`'s chats whose title has every word of `query`, then their messages that do,
    at most `limit` results in all; `archived`: include the messages `/new`, an edit or a
    regeneration archived (marked as such)."""
    terms = terms_of(query)
    if not terms or owner is None or not owner.is_authenticated or limit <= 0:
        return []
    sessions = _listed_sessions(owner)
    titled = sessions.filter(_every(terms, "title")).order_by("-updated", "-id")
    hits = [
        Hit(
            session=session.key,
            title=session.title,
            message_id=None,
            run_id=None,
            role=None,
            snippet=session.title,
            created=session.updated,
            archived=False,
        )
        for session in titled[: limit + _SPARE]
        if is_user_key(session.key)
    ][:limit]
    if len(hits) < limit:
        hits += _message_hits(sessions, terms, limit - len(hits), archived=archived)
    return hits


def _listed_sessions(owner: Any) -> QuerySet[Session]:
    prefixes = Q()
    for channel in USER_CHANNELS:
        prefixes |= Q(key__startswith=f"{channel}:")
    # The person's own chats and their teams' (`selectors.find_session`'s rule).
    team_chats = Q(owner__isnull=True, team__isnull=False, team__user=owner)
    return Session.objects.filter(prefixes).filter(Q(owner=owner) | team_chats)


def _every(terms: list[str], field: str) -> Q:
    condition = Q()
    for term in terms:
        condition &= Q(**{f"{field}__icontains": term})
    return condition


def _message_hits(
    sessions: QuerySet[Session], terms: list[str], limit: int, *, archived: bool
) -> list[Hit]:
    messages = Message.objects.filter(
        session__in=sessions, role__in=SEARCHED_ROLES, content__isnull=False
    ).exclude(run__channel=REPORT_CHANNEL)
    if not archived:
        messages = messages.filter(archived=False)
    if connection.vendor == "postgresql":
        messages = _full_text(messages, terms)
    else:
        messages = messages.filter(_every(terms, "content")).order_by("-id")
    rows = messages.select_related("session")[: limit + _SPARE]
    return [
        Hit(
            session=row.session.key,
            title=row.session.title,
            message_id=row.pk,
            run_id=str(row.run_id) if row.run_id else None,
            role=row.role,
            snippet=snippet(row.content or "", terms),
            created=row.created,
            archived=row.archived,
        )
        for row in rows
        if is_user_key(row.session.key)
    ][:limit]


def _full_text(messages: QuerySet[Message], terms: list[str]) -> QuerySet[Message]:
    from django.contrib.postgres.search import SearchQuery, SearchRank, SearchVector

    # The very expression the GIN index is built on, so that the planner uses it.
    vector = SearchVector("content", config=TEXT_SEARCH_CONFIG)
    # Each word as a prefix; words are letters and digits only, so nothing in them is
    # tsquery syntax.
    words = SearchQuery(
        " & ".join(f"{term}:*" for term in terms), search_type="raw", config=TEXT_SEARCH_CONFIG
    )
    return (
        messages.alias(matched=vector)
        .filter(matched=words)
        .annotate(rank=SearchRank(vector, words))
        .order_by("-rank", "-id")
    )


def snippet(text: str, terms: list[str], width: int = SNIPPET_CHARS) -> str:
    """The part of `text` around the first of `terms` it has, on one line, with an ellipsis
    where it was cut."""
    flat = " ".join(text.split())
    lowered = flat.lower()
    found = [at for at in (lowered.find(term) for term in terms) if at >= 0]
    at = min(found) if found else 0
    start = max(0, min(at - width // 3, len(flat) - width))
    end = min(len(flat), start + width)
    # Whole words at either cut.
    if start > 0:
        space = flat.find(" ", start, at if found else start + width // 3)
        start = space + 1 if space >= 0 else start
    if end < len(flat):
        space = flat.rfind(" ", max(start, at + 1), end)
        end = space if space > start else end
    return f"{'…' if start > 0 else ''}{flat[start:end]}{'…' if end < len(flat) else ''}"
