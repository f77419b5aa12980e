"""How a turn's tools send the agent's messages: `ToolContext.deliver`."""

from __future__ import annotations

import logging

from django.contrib.auth.models import User

from agent.events import Emit, Event, MessageEvent
from agent.turn import fanout, store
from sessions_app.models import Session

logger = logging.getLogger(__name__)


class Delivery:
    """Delivers messages for one turn. To the turn's own session they go out as events of
    the turn (the tool call that sent them is its record); to another conversation of the
    same owner they are saved there and shown on its open sockets.

    A message without a target goes where the turn's answer goes: its `home`, the
    conversation a cron job or the heartbeat reports to, else the turn's own session.
    `said` keeps what the model sent there, so that the turn does not deliver the same
    words again as its reply."""

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

    async def __call__(self, content: str, *, session_key: str | None = None) -> None:
        key = session_key or self.home.key
        if key == self.session.key:
            await self.emit(MessageEvent(role="assistant", content=content, run_id=self.run_id))
        else:
            target = (
                self.home
                if key == self.home.key
                else await store.get_or_create_session(key=key, owner=self.owner)
            )
            await post(target, content)
            logger.info("run %s delivered a message to %s", self.run_id, key)
        if key == self.home.key:
            self.said.append(content)

    def repeats(self, reply: str) -> bool:
        """Whether `reply` is what the model already sent home with the tool."""
        return reply.strip() in {text.strip() for text in self.said}


async def post(target: Session, content: str, *after: Event) -> None:
    """Deliver `content` to `target` from outside its turns: saved there as the agent's
    message, then shown on its open sockets, followed by the `after` events."""
    await store.add_message(session=target, message={"role": "assistant", "content": content})
    await fanout.publish(target.pk, MessageEvent(role="assistant", content=content))
    for event in after:
        await fanout.publish(target.pk, event)
