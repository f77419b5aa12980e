"""Chats shared as read-only snapshots: sharing one, taking a share back, reading those a
person may see, and continuing one in a chat of one's own.

A share is readable by its owner, by the people it names and by the active members of the
groups (teams) it names; to anyone else it does not exist. Who may be named is the door's
business (a team is a group here: this app knows nothing of teams' profiles).

Continuing a share copies its messages into a new web chat of the reader's, as that chat's
history: the model reads them on the chat's next turn as if they had been said there.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterable
from typing import Any

from django.contrib.auth.models import Group, User
from django.db import transaction
from django.db.models import Q, QuerySet

from sessions_app import selectors
from sessions_app.keys import split_key
from sessions_app.models import ChatShare, Message, Session

logger = logging.getLogger(__name__)

# The most of a chat a snapshot holds: its latest messages, as the chat page would show them
# from its first page to this many.
SNAPSHOT_LIMIT = 1_000
# What a snapshot keeps of a displayed message that says nothing of the chat itself: the
# earlier versions of a message point at messages of the owner's chat that it does not copy.
_NOT_SHARED = ("versions",)
# The roles a continued chat takes over: what the model reads as history.
_CONTINUED_ROLES = frozenset({Message.Role.USER, Message.Role.ASSISTANT, Message.Role.TOOL})
TITLE_LENGTH = 60
CONTINUED = " (continued)"
UNTITLED = "Shared chat"


class NothingToShare(Exception):
    """The chat has no messages yet."""


# ---- writes ------------------------------------------------------------------------------


def snapshot(*, session: Session) -> list[dict[str, Any]]:
    """The session's live conversation as its page shows it, tool calls and their results
    included, ready to be kept."""
    shown = selectors.messages_for_display(session=session, limit=SNAPSHOT_LIMIT)
    return [{k: v for k, v in message.items() if k not in _NOT_SHARED} for message in shown]


@transaction.atomic
def create_share(
    *,
    owner: User,
    session: Session,
    teams: Iterable[Group] = (),
    people: Iterable[User] = (),
) -> ChatShare:
    """Share `owner`'s `session` as it is now with `teams` and `people`. NothingToShare for
    a chat that has said nothing yet."""
    messages = snapshot(session=session)
    if not messages:
        raise NothingToShare(session.key)
    share = ChatShare.objects.create(
        owner=owner, source=session, title=_title(session, messages), messages=messages
    )
    share.teams.set(list(teams))
    share.people.set([person for person in people if person.pk != owner.pk])
    logger.info("%s shared %s as %s", owner, session.key, share.pk)
    return share


@transaction.atomic
def delete_share(*, share: ChatShare) -> None:
    """Take the share back: its link leads nowhere from now on. Chats already continued
    from it are their readers' own and stay."""
    share.delete()


@transaction.atomic
def continue_share(*, share: ChatShare, user: User) -> Session:
    """A new web chat of `user`'s whose history is the share's snapshot: its user, assistant
    and tool messages, the assistant's tool calls with them, so that the model's next call
    reads a conversation it could have had."""
    chat_id = secrets.token_hex(16)
    key = f"web:{chat_id}"
    channel, _ = split_key(key)
    title = (share.title or UNTITLED)[: 200 - len(CONTINUED)] + CONTINUED
    session = Session.objects.create(
        key=key, channel=channel, chat_id=chat_id, owner=user, title=title
    )
    Message.objects.bulk_create(
        Message(session=session, **fields) for fields in _continued(share.messages)
    )
    logger.info("%s continued share %s in %s", user, share.pk, key)
    return session


def _continued(messages: Iterable[dict[str, Any]]) -> Iterable[dict[str, Any]]:
    """The stored fields of the snapshot's messages a continued chat takes over. A failed
    turn's error (no message of its own) and the notes the page shows as system lines are
    not the model's history; they stay behind."""
    for message in messages:
        if message.get("role") not in _CONTINUED_ROLES or message.get("error"):
            continue
        yield {
            "role": message["role"],
            "content": message.get("content"),
            "tool_calls": message.get("tool_calls") or None,
            "tool_call_id": message.get("tool_call_id") or "",
            "name": message.get("name") or "",
            "reasoning_content": message.get("reasoning_content") or "",
            "stopped": bool(message.get("stopped")),
        }


def _title(session: Session, messages: list[dict[str, Any]]) -> str:
    """The chat's title, or else its first words (as a chat is named after them)."""
    if session.title:
        return session.title
    for message in messages:
        if message.get("role") == Message.Role.USER and isinstance(message.get("content"), str):
            words = " ".join(message["content"].split())[:TITLE_LENGTH]
            if words:
                return words
    return ""


# ---- reads -------------------------------------------------------------------------------


def _reads(user: Any) -> bool:
    return user is not None and user.is_authenticated and user.is_active


def _readable_by(user: User) -> Q:
    """The shares `user` may read: theirs, those naming them, and those naming a group of
    theirs. Subqueries rather than joins: a join would repeat a share once per way in."""
    named = ChatShare.people.through.objects.filter(user=user).values("chatshare_id")
    grouped = ChatShare.teams.through.objects.filter(group__user=user).values("chatshare_id")
    return Q(owner=user) | Q(pk__in=named) | Q(pk__in=grouped)


def visible_share(*, share_id: str, user: Any) -> ChatShare | None:
    """Share `share_id` if `user` may read it; None for anyone else, as for no share."""
    if not _reads(user):
        return None
    return ChatShare.objects.select_related("owner").filter(_readable_by(user), pk=share_id).first()


def own_share(*, share_id: str, owner: Any) -> ChatShare | None:
    """`owner`'s share `share_id`; None for another's, which may only be read."""
    if not _reads(owner):
        return None
    return ChatShare.objects.select_related("owner").filter(pk=share_id, owner=owner).first()


def shares_by(*, owner: Any) -> QuerySet[ChatShare]:
    """`owner`'s shares, the newest first, without their snapshots."""
    if not _reads(owner):
        return ChatShare.objects.none()
    return ChatShare.objects.select_related("owner").filter(owner=owner).defer("messages")


def shares_with(*, user: Any) -> QuerySet[ChatShare]:
    """The shares of others that `user` may read, the newest first, without their
    snapshots."""
    if not _reads(user):
        return ChatShare.objects.none()
    return (
        ChatShare.objects.select_related("owner")
        .filter(_readable_by(user))
        .exclude(owner=user)
        .defer("messages")
    )
