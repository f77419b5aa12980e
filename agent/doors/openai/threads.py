"""Which session a client's conversation lands in, when the request names none.

An OpenAI client sends the whole conversation with every request and names no
conversation. In order of precedence:

1. `X-Session-Key` or `user` name the session (`openai:<that>`).
2. Open WebUI, where its operator lets it forward who is asking
   (`ENABLE_FORWARD_USER_INFO_HEADERS=true`), names its chat: `X-OpenWebUI-Chat-Id`.
3. Otherwise the conversation itself says: after each answer the door keeps a digest of the
   conversation as the client now holds it (its user messages and the answers' text), and a
   request whose earlier messages have that digest continues the same session. A
   conversation edited or forked in the client continues from where it was last answered.
4. A conversation that continues nothing starts a session of its own.

A direct generation (`agentsite-plain`) is a generation, not a chat of the agent's: named
(1) it lands in that session, and continuing a chat (3) in that chat's; otherwise it lands
in a session the chat list does not show (`openai-direct:`), so that a client's
housekeeping (titles, tags, suggestions) does not fill the list, and it leaves no digest.
Its chat id (2) is not taken for it, as those requests carry it too.

The digest leaves out what clients change or drop between requests: the client's tool
messages and calls, reasoning that a client folds into the answer's text
(`<details>…</details>`), spacing, and the bytes of files (only that a file was there).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User

from agent.doors.openai.chat_messages import FILE_PARTS, Conversation
from agent.doors.openai.chat_request import CHANNEL
from agent.doors.openai.errors import OpenAIError
from agent.turn import conversation_session, get_or_create_session, mark_conversation
from sessions_app import keys
from sessions_app.models import Session
from sessions_app.services import NoSuchChat

logger = logging.getLogger(__name__)

CHAT_ID_HEADER = "X-OpenWebUI-Chat-Id"
DIRECT_CHANNEL = "openai-direct"
# The most a request waits for the digests of its owner's earlier answers.
MARK_WAIT_SECONDS = 2.0
# The digests being written, by owner, with the tasks that write them.
_pending: dict[int, set[asyncio.Task[None]]] = {}
_FOLDED = re.compile(r"<details\b[^>]*>.*?</details>", re.S | re.I)
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class Thread:
    """Where one request's conversation lands, and how the door finds it again."""

    direct: bool
    # The chat id named by `X-Session-Key` or `user`, or by Open WebUI.
    named: str | None
    # The conversation as the client holds it (its instructions aside), and the digest of
    # the part of it an earlier answer ended.
    messages: tuple[dict[str, Any], ...]
    before: str | None

    @classmethod
    def of(
        cls,
        conversation: Conversation,
        *,
        direct: bool,
        session: str | None,
        chat_id: str | None,
    ) -> Thread:
        """The thread of a request that names `session` (`user`, `X-Session-Key`) or
        comes with Open WebUI's `chat_id`, or neither."""
        named = session
        if named is None and chat_id and not direct and keys.is_chat_id(chat_id):
            named = chat_id
        return cls.of_conversation(conversation, direct=direct, named=named)

    @classmethod
    def of_conversation(
        cls, conversation: Conversation, *, direct: bool, named: str | None
    ) -> Thread:
        messages = (*conversation.history, conversation.message, *(conversation.turn or ()))
        # A new message continues what came before it; the results of the client's tools
        # continue the turn that asked for them, the message and all.
        before = messages if conversation.turn is not None else conversation.history
        return cls(direct, named, messages, digest(before) if named is None else None)

    async def session(self, user: User, *, new_id: str) -> Session:
        if self.named is not None:
            key = self.named if keys.is_team_key(self.named) else f"{CHANNEL}:{self.named}"
            try:
                return await get_or_create_session(key=key, owner=user)
            except NoSuchChat:  # another team's chat, or none: as any session not theirs
                raise OpenAIError(
                    404, f"Session '{key}' not found.", code="session_not_found"
                ) from None
        if self.before is not None:
            await _marks_written(user.pk)
            found = await conversation_session(owner_id=user.pk, digest=self.before)
            if found is not None:
                return found
        channel = DIRECT_CHANNEL if self.direct else CHANNEL
        return await get_or_create_session(key=f"{channel}:{new_id}", owner=user)

    def remember(self, user: User, session: Session) -> Callable[[str], None] | None:
        """What keeps the conversation's digest once it is answered with the text `sent`:
        none for a conversation the client names, nor for a direct generation, which is
        no chat to continue. It is written on the side, as the answer leaves; the owner's
        next request here waits for it before it looks (`session`), and one that reaches
        another process comes a round trip after the write began."""
        if self.named is not None or self.direct:
            return None

        def keep(sent: str) -> None:
            found = digest((*self.messages, {"role": "assistant", "content": sent}))
            if found is None:
                return
            writing = mark_conversation(owner_id=user.pk, digest=found, session_id=session.pk)
            task = asyncio.get_running_loop().create_task(_written(writing))
            pending = _pending.setdefault(user.pk, set())
            pending.add(task)
            task.add_done_callback(lambda done: _settle(user.pk, done))

        return keep


async def _written(writing: Awaitable[None]) -> None:
    try:
        await writing
    except Exception:  # the answer stands; the next request starts a session anew
        logger.exception("where a client's conversation continues could not be kept")


def _settle(owner_id: int, task: asyncio.Task[None]) -> None:
    pending = _pending.get(owner_id)
    if pending is not None:
        pending.discard(task)
        if not pending:
            del _pending[owner_id]


async def _marks_written(owner_id: int) -> None:
    """Wait, a little, for the digests of `owner_id`'s answers still being written here."""
    pending = _pending.get(owner_id)
    if pending:
        await asyncio.wait(set(pending), timeout=MARK_WAIT_SECONDS)


def digest(messages: Iterable[dict[str, Any]]) -> str | None:
    """The digest of a conversation; None for one with nothing in it to continue."""
    said = [entry for entry in map(_said, messages) if entry is not None]
    if not said:
        return None
    return hashlib.sha256(json.dumps(said, ensure_ascii=False).encode()).hexdigest()


def _said(message: dict[str, Any]) -> list[str] | None:
    role = message.get("role")
    if role not in ("user", "assistant"):
        return None
    content = message.get("content")
    if isinstance(content, list):
        # Texts first: a client may order a message's parts otherwise from one request to
        # the next, but not its words.
        texts = [str(part.get(part["type"]) or "") for part in content]
        files = [f"[{part['type']}]" for part in content if part["type"] in FILE_PARTS]
        content = "\n".join(
            [
                text
                for part, text in zip(content, texts, strict=True)
                if part["type"] not in FILE_PARTS
            ]
            + files
        )
    text = _SPACE.sub(" ", _FOLDED.sub(" ", content or "")).strip()
    if not text:
        return None  # an answer that only called tools: clients keep it, or not
    return [role, text]
