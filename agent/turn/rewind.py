"""Running a conversation again from one of the user's messages: the last reply regenerated,
or a message edited and answered afresh.

That message and everything after it leave the conversation the way `/new` takes a whole
conversation out of it: archived, kept on record (the admin and the API show them, marked),
no longer shown nor sent to the model. The message then runs again as a new turn, in its own
words or the edited ones. It happens under the session's lock, so no other turn of the
session runs in between, and a second tab that asks for the same thing at the same time
finds the message archived already and is told so.

In a team chat, where every member writes, a member runs the conversation again only from
a message of their own (the one their turn answered): another's words are not theirs to
edit, nor its reply theirs to throw away.
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from django.contrib.auth.models import User

from agent.events import Archived, Emit
from agent.turn import store
from agent.turn.refusals import InvalidInput, TurnError
from agent.turn.subagents import SYSTEM_CHANNEL
from sessions_app.models import Message, Session

RUNNING = "a reply is being written in this chat: wait for it to finish, or stop it, then try again"
WAITING = (
    "a turn of this chat waits for your answer about a tool call: answer it, or stop it, "
    "then try again"
)
NOT_YOURS = "you can only regenerate or edit your own messages"
CHANGED = (
    "this conversation changed meanwhile (another edit, regeneration or message came first): "
    "look at it again and retry"
)


class TurnBusy(TurnError):
    """A turn of the session is running, or waits for a person: what it goes on to write
    would land after the messages being archived."""

    def __init__(self, message: str = RUNNING) -> None:
        super().__init__(message)


async def refuse_if_busy(session: Session) -> None:
    """`TurnBusy` if a turn of the session runs (in any process) or waits for a person.

    A turn whose record is closed is over, though its task may still be tidying up (its
    hooks, its place in the queue for consolidation): the rerun waits for it, briefly, on
    the session's lock."""
    if await store.has_running_turn(session_id=session.pk):
        raise TurnBusy(RUNNING)
    if await store.pending_approvals(session_id=session.pk):
        raise TurnBusy(WAITING)


@dataclass(frozen=True, slots=True)
class RerunFrom:
    """The user's message a conversation runs again from; `latest`: chosen as the user's
    latest (a regeneration), which it must still be when it runs."""

    message_id: int
    run_id: str | None
    content: str
    latest: bool = False


async def starting_point(
    session: Session,
    *,
    message_id: int | None = None,
    run_id: UUID | None = None,
    requester: User | None = None,
) -> RerunFrom:
    """The message of the user's to run again from: message `message_id`, the message that
    started run `run_id`, or (neither) the user's latest. Refused (`InvalidInput`) when the
    chat has no such live message, or it is not one the user wrote; in a team chat, when
    it is not one `requester` wrote (the latest message of the chat, without an id)."""
    field = "run_id" if run_id is not None and message_id is None else "id"
    message = await store.rerun_start(session=session, message_id=message_id, run_id=run_id)
    if message is None:
        if message_id is None and run_id is None:
            raise InvalidInput("there is no message of yours in this chat to answer again")
        raise InvalidInput(
            "there is no such message in this chat (it may have been archived)", field=field
        )
    if message.role != Message.Role.USER or _is_report(message):
        raise InvalidInput("only a message you wrote can be edited or answered again", field=field)
    if session.team_id is not None and not _written_by(message, requester):
        raise InvalidInput(NOT_YOURS, field=field)
    return RerunFrom(
        message_id=message.pk,
        run_id=str(message.run_id) if message.run_id else None,
        content=message.content or "",
        latest=message_id is None and run_id is None,
    )


def _written_by(message: Message, requester: User | None) -> bool:
    """Whether `requester` sent the message: its run's author (whose turn it started)."""
    author_id = message.run.author_id if message.run is not None else None
    return requester is not None and author_id is not None and author_id == requester.pk


def _is_report(message: Message) -> bool:
    """A sub-agent's report to the agent, stored as a user message: the agent's input."""
    return message.run is not None and message.run.channel == SYSTEM_CHANNEL


async def archive_from(session: Session, start: RerunFrom, emit: Emit) -> None:
    """Archive `start`'s message and every one after it, and tell the session's clients;
    called under the session's lock. Refused if the message left the conversation since it
    was chosen (another tab edited it, or regenerated, first), and a regeneration if a
    message of the user's came after it meanwhile."""
    if start.latest:
        latest = await store.rerun_start(session=session)
        if latest is not None and latest.pk != start.message_id:
            raise InvalidInput(CHANGED)
    count = await store.archive_from(session=session, message_id=start.message_id)
    if not count:
        raise InvalidInput(CHANGED)
    await emit(Archived(id=start.message_id, count=count, run_id=start.run_id))
