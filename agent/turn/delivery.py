"""How a turn's tools send the agent's messages: `ToolContext.deliver`."""

from __future__ import annotations

import logging
from collections.abc import Awaitable

from django.contrib.auth.models import User

from agent.events import Emit, Event, MessageEvent, StreamChunk, StreamEnd, StreamStart
from agent.tools.base import ToolError
from agent.turn import fanout, store
from agent.turn.db import on_db
from sessions_app import keys, selectors
from sessions_app.models import Session
from sessions_app.services import SessionDeleted

logger = logging.getLogger(__name__)

# Channels whose conversations a person opens at a door besides `keys.USER_CHANNELS`: the
# command line's, which `manage.py agent --session cli:<id>` continues.
_AGENT_OPENED = ("cli",)


class Delivery:
    """Delivers messages for one turn. To the turn's own session they go out as events of
    the turn (the tool call that sent them is its record); to another conversation of the
    same owner they are saved there and shown on its open sockets.

    A message without a target goes where the turn's answer goes: its `home`, the
    conversation a cron job or the heartbeat reports to, else the turn's own session. Any
    other target must be one of the owner's conversations that already exists and that a
    door opens (`reachable`): the model names no new conversation into being, and none of
    the agent's own working sessions (a cron job's, the heartbeat's, a sub-agent's), whose
    history a later turn of theirs would read as the agent's own words.
    `said` keeps what the model sent there, so that the turn does not deliver the same
    words again as its reply; `said_here`, what it sent to the turn's own session, whose
    sockets are not streamed those words again either (`RepeatScreen`)."""

    def __init__(
        self,
        session: Session,
        owner: User | None,
        emit: Emit,
        *,
        run_id: str,
        home: Session | None = None,
    ) -> None:
        self.session = session
        self.owner = owner
        self.emit = emit
        self.run_id = run_id
        self.home = home or session
        self.said: list[str] = []
        self.said_here: list[str] = []

    async def __call__(self, content: str, *, session_key: str | None = None) -> str | None:
        """Deliver `content`; the key of the conversation it went to, or None when that is
        the turn's own (the tool's result then says so, which is how a reloaded chat knows
        to show the message)."""
        key = session_key or self.home.key
        went: str | None = key
        if key == self.session.key:
            await self.emit(MessageEvent(role="assistant", content=content, run_id=self.run_id))
            self.said_here.append(content)
            went = None
        else:
            target = self.home if key == self.home.key else await reachable(key, self.owner)
            try:
                await post(target, content)
            except SessionDeleted:
                raise ToolError(f"the conversation {key} was deleted; nothing was sent") from None
            logger.info("run %s delivered a message to %s", self.run_id, key)
        if key == self.home.key:
            self.said.append(content)
        return went

    def repeats(self, reply: str) -> bool:
        """Whether `reply` is what the model already sent home with the tool."""
        return reply.strip() in {text.strip() for text in self.said}

    def may_repeat_here(self, text: str) -> bool:
        """Whether `text`, the start of a reply, may yet turn out to repeat a message sent to
        the turn's own session."""
        start = text.strip()
        return any(said.strip().startswith(start) for said in self.said_here)

    def repeats_here(self, text: str) -> bool:
        return text.strip() in {said.strip() for said in self.said_here}


async def reachable(key: str, owner: User | None) -> Session:
    """`owner`'s conversation `key`, when the `message` tool may deliver there: one that a
    door opens for a person (their web, api and openai chats, their teams' chats, the
    command line's) and that exists. ToolError, saying why, for any other."""
    channel, chat_id = keys.split_key(key)
    opens = keys.is_user_key(key) or (channel in _AGENT_OPENED and keys.is_chat_id(chat_id))
    if not opens:
        logger.warning("refused a message to %s: no door opens it", key)
        raise ToolError(
            f"{key} is not a conversation a person can open; messages go to this "
            "conversation (leave out channel and chat_id) or to another of the user's own "
            f"{', '.join((*keys.USER_CHANNELS, *_AGENT_OPENED))} conversations"
        )
    session = await _existing(key=key, owner=owner)
    if session is None:
        raise ToolError(
            f"the user has no conversation {key}; messages go only to conversations that "
            "exist (leave out channel and chat_id to answer this one)"
        )
    return session


@on_db
def _existing(*, key: str, owner: User | None) -> Session | None:
    if owner is not None:
        # Their own conversation, or a chat of one of their teams.
        return selectors.find_session(key=key, owner=owner)
    return Session.objects.filter(key=key, owner=None, team__isnull=True).first()


class RepeatScreen:
    """Passes the loop's events on, but holds back a streamed reply while it repeats, so
    far, a message the model already sent to the turn's own session with the `message`
    tool. One that turns out to repeat it whole is never streamed: the person has read it
    once, as the message, and the turn sends no reply frame for it either. One that turns
    out to differ is streamed from its start, chunks and all, the moment it does.

    A reply cut short by /stop is let out as far as it got, since it is saved (marked
    stopped) and shown so after a reload; one that a retry threw away is dropped."""

    def __init__(self, delivery: Delivery, emit: Emit) -> None:
        self.delivery = delivery
        self.emit = emit
        self.held: list[Event] | None = None
        self.msg_id = ""
        self.text = ""

    def __call__(self, event: Event) -> Awaitable[None]:
        """Not a coroutine of its own while nothing is held, which is nearly always: a
        streamed chunk then costs one more call, not one more coroutine."""
        if self.held is None:
            if isinstance(event, StreamStart) and self.delivery.said_here:
                self.held, self.msg_id, self.text = [event], event.msg_id, ""
                return _done()
            return self.emit(event)
        return self._while_held(event)

    async def _while_held(self, event: Event) -> None:
        if self.held is None:  # let go by an event awaited before this one
            await self.emit(event)
            return
        if isinstance(event, StreamChunk) and event.msg_id == self.msg_id:
            self.held.append(event)
            self.text += event.content
            if not self.delivery.may_repeat_here(self.text):
                await self._release()
            return
        if isinstance(event, StreamEnd) and event.msg_id == self.msg_id:
            held, self.held = self.held, None
            if event.discarded or (not event.stopped and self.delivery.repeats_here(self.text)):
                return  # nothing of it was shown, so there is nothing to end
            for earlier in held:
                await self.emit(earlier)
            await self.emit(event)
            return
        # Not part of the held reply (reasoning that comes with it): it goes on as it comes.
        await self.emit(event)

    async def _release(self) -> None:
        held, self.held = self.held or [], None
        for event in held:
            await self.emit(event)


async def _done() -> None:
    """An awaitable that does nothing, for an event held back."""


async def post(target: Session, content: str, *after: Event) -> None:
    """Deliver `content` to `target` from outside its turns: saved there as the agent's
    message, then shown on its open sockets, followed by the `after` events."""
    await store.add_message(session=target, message={"role": "assistant", "content": content})
    await fanout.publish(target.pk, MessageEvent(role="assistant", content=content))
    for event in after:
        await fanout.publish(target.pk, event)
