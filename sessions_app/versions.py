"""Earlier versions of a conversation: what an edit or a regeneration replaced.

Editing a message of the user's, or regenerating the reply to it, archives that message and
everything after it, and runs the message again as a new turn, whose run names the message
it replaces (`Run.replaces`). So the user's message at one place of the conversation has a
line of versions: the live one, the one it replaced, the one that one replaced, and so on.

An earlier version is shown as it stood when it was replaced: its message and the messages
archived with it, those after it that were live then. Messages among them that an edit
inside that version had replaced earlier still are archived, in the same range of ids, and
are left out: they belong to a version of their own.
"""

from __future__ import annotations

from typing import Any

from sessions_app.models import Message


def _replacing(session_id: int) -> list[tuple[int, int, str]]:
    """`(message, message it replaced, its text)` for every message of the user's in the
    session that said again one that an edit or a regeneration replaced, oldest first."""
    rows = (
        Message.objects.filter(
            session_id=session_id, role=Message.Role.USER, run__replaces__isnull=False
        )
        .order_by("id")
        .values_list("id", "run_id", "run__replaces", "content")
    )
    seen: set[Any] = set()
    found: list[tuple[int, int, str]] = []
    for message_id, run_id, replaced, content in rows:
        if run_id in seen:  # the run's own message is its first one
            continue
        seen.add(run_id)
        found.append((message_id, replaced, content or ""))
    return found


def add_versions(session_id: int, shown: list[dict[str, Any]]) -> None:
    """Give each message of the user's in `shown` that replaced others its `versions`:
    `{"earlier": [ids of the messages it replaced, oldest first], "edited": whether any of
    them said something else (an edit; else only regenerations)}`."""
    if not any(m.get("role") == "user" for m in shown):
        return
    replacing = _replacing(session_id)
    if not replacing:
        return
    replaced = {message: earlier for message, earlier, _ in replacing}
    texts = {message: text for message, _, text in replacing}
    missing = set(replaced.values()) - texts.keys()
    if missing:
        rows = Message.objects.filter(pk__in=missing).values_list("id", "content")
        texts.update((message, text or "") for message, text in rows)
    for message in shown:
        if message.get("role") != "user" or message.get("id") not in replaced:
            continue
        earlier: list[int] = []
        at = message["id"]
        while at in replaced and len(earlier) < len(replaced):
            at = replaced[at]
            earlier.append(at)
        earlier.reverse()
        text = message.get("content") or ""
        edited = any((texts.get(m) or "") != text for m in earlier)
        message["versions"] = {"earlier": earlier, "edited": edited}


def version_rows(
    *, session_id: int, message_id: int, annotations: dict[str, Any]
) -> list[Any] | None:
    """The messages of the earlier version that starts at message `message_id` of the
    session, oldest first, with `annotations` (what `selectors` shows of a message beyond
    its fields); None if no message of the session's was replaced there."""
    replacing = _replacing(session_id)
    ends = [message for message, earlier, _ in replacing if earlier == message_id]
    if not ends:
        return None
    rows = list(
        Message.objects.filter(
            session_id=session_id, archived=True, id__gte=message_id, id__lt=ends[0]
        )
        .annotate(**annotations)
        .order_by("id")
    )
    # Versions replaced inside this one: from the message replaced to the one that replaced it.
    inner = [
        (earlier, message)
        for message, earlier, _ in replacing
        if message_id < earlier and message < ends[0]
    ]
    return [row for row in rows if not any(start <= row.id < end for start, end in inner)]
