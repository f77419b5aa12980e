"""Writes to sessions and their messages. Keyword-only, each one transaction. The run
records' writes (`sessions_app.runs`) build on the ones here.

A session can be deleted while one of its turns runs (through the API, the admin, or with
its owner). The writes a turn makes then raise `SessionDeleted` instead of an integrity
error, and the run's last write quietly finds nothing to update.

A turn that started under the session's lock is the session's current turn (`Session.turn`)
until the next one starts. Its messages are saved only while it still is: one that lost the
lock (its database connection was dropped) and was overtaken gets `TurnSuperseded`, so that
two turns' messages never interleave.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, NamedTuple
from uuid import UUID

from django.contrib.auth.models import Group, User
from django.db import transaction
from django.utils import timezone

from sessions_app import selectors
from sessions_app.keys import TEAM_CHANNEL, is_team_key, split_key
from sessions_app.models import Message, Relayed, Run, Session

TITLE_LENGTH = 60
# Elements of markup, one after the other, at the start of a text.
_LEADING_MARKUP = re.compile(r"\A(?:\s*<([A-Za-z_][\w-]*)\b[^>]*>.*?</\1>)+", re.S)


class SessionDeleted(Exception):
    """The session was deleted while something was being written to it."""


class TurnSuperseded(Exception):
    """Another turn of the session started after this one, which must write nothing more."""


class NoSuchChat(LookupError):
    """A team chat key that names no chat of the person's teams: as if it did not exist,
    whether it does (another team's) or not. Team chats are made by `create_team_chat`,
    never by naming a key."""


def get_or_create_session(*, key: str, owner: User | None = None) -> Session:
    """`owner`'s session `key` (the ownerless one for None), made if it is new; a team
    chat of one of `owner`'s teams, found (NoSuchChat if it is none)."""
    if is_team_key(key):
        found = selectors.find_session(key=key, owner=owner)
        if found is None:
            raise NoSuchChat(key)
        return found
    channel, chat_id = split_key(key)
    session, _ = Session.objects.get_or_create(
        key=key, owner=owner, defaults={"channel": channel, "chat_id": chat_id}
    )
    return session


def create_team_chat(*, team: Group, title: str = "") -> Session:
    """A new chat of `team` (a group), which every member of it reads and writes."""
    chat_id = uuid.uuid4().hex[:20]
    return Session.objects.create(
        key=f"{TEAM_CHANNEL}:{chat_id}",
        channel=TEAM_CHANNEL,
        chat_id=chat_id,
        owner=None,
        team=team,
        title=title[:200],
    )


def _update_session(session: Session, **fields: Any) -> None:
    fields["updated"] = timezone.now()
    if not Session.objects.filter(pk=session.pk).update(**fields):
        raise SessionDeleted(session.key)
    for name, value in fields.items():
        setattr(session, name, value)


def title_from(session: Session, prompt: str) -> None:
    """Title `session` after `prompt`, the first one to say something, if it has no title:
    its words, after any markup a client put before them (Open WebUI's list of the
    message's files, `<attached_files>…</attached_files>`)."""
    title = _title_of(prompt)
    if not session.title and title:
        _update_session(session, title=title)


def _title_of(prompt: str) -> str:
    words = _LEADING_MARKUP.sub("", prompt)
    return " ".join(words.split())[:TITLE_LENGTH]


def create_row(session: Session, table: type[Run] | type[Message], **fields: Any) -> Any:
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


def take_turn(session: Session, run: Run) -> None:
    """Make `run` the session's current turn (see `_lock_session`)."""
    Session.objects.filter(pk=session.pk).update(turn=run.pk)
    session.turn = run.pk


def add_message(
    *,
    session: Session,
    message: dict[str, Any],
    run: Run | None = None,
    usage: dict[str, int] | None = None,
) -> Message:
    created: Message = create_row(session, Message, run=run, **_message_fields(message, usage))
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
def forget_allowed_tool(*, session_id: int, name: str) -> list[str] | None:
    """Take `name` off the tools answered "always" in the session, so that its calls wait
    for a person again from the next turn on; the tools still allowed, or None when the
    session is gone. Under the row's lock, as an "always" adds to the list."""
    session = Session.objects.select_for_update().filter(pk=session_id).first()
    if session is None:
        return None
    if name in session.allowed_tools:
        session.allowed_tools = [tool for tool in session.allowed_tools if tool != name]
        session.save(update_fields=["allowed_tools"])
    return list(session.allowed_tools)


def allowed_tools(*, session_id: int) -> list[str]:
    """The tools answered "always" in the session (none when it is gone)."""
    found = Session.objects.filter(pk=session_id).values_list("allowed_tools", flat=True)
    return list(found.first() or [])


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
    first = live.filter(pk=message_id).values_list("role", "content").first()
    if first is None:
        return 0
    count = live.filter(pk__gte=message_id).update(archived=True)
    # The chat was named after the message that now goes: the edited one names it again
    # (`title_from`), unless the user named the chat themselves.
    role, content = first
    opening = not live.filter(pk__lt=message_id, role=Message.Role.USER).exists()
    title = Session.objects.filter(pk=session.pk).values_list("title", flat=True).first()
    if role == Message.Role.USER and opening and title == _title_of(content or ""):
        _update_session(session, title="")
    else:
        _update_session(session)
    return count


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


def relay(*, session_id: int, message: dict[str, Any], origin: str) -> None:
    """Leave `message` for the web server to pass to the session's sockets; nothing if the
    session is gone."""
    if Session.objects.filter(pk=session_id).exists():
        Relayed.objects.create(session_id=session_id, message=message, origin=origin)


def prune_relayed(*, older_than: timedelta) -> int:
    return Relayed.objects.filter(created__lt=timezone.now() - older_than).delete()[0]
