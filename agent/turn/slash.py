"""Slash commands: `/new`, `/stop`, `/help`, `/model`. Each answers with text. The page's
model picker is `/model NAME` without the conversation: `choose_session_model`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from uuid import UUID

from agent.conf import AgentSettings, agent_settings
from agent.turn import consolidation, ratelimit, spending, store
from agent.turn.approvals import end_waiting
from agent.turn.db import on_db
from agent.turn.locks import cancel_running, session_lock
from agent.turn.policies import Person, person_settings
from agent.turn.refusals import (
    InvalidInput,
    SessionGone,
    TurnError,
    allowed_model,
    allowed_models_text,
    choose_model,
)
from agent.turn.watch import announce_stop
from sessions_app.models import Session
from sessions_app.services import SessionDeleted

logger = logging.getLogger(__name__)

# The command line's sessions (`cli:…`): the operator's, whose turns no rate limits.
CLI_CHANNEL = "cli"
# How long /new waits for a consolidation already running before it archives without it.
NEW_WAIT_SECONDS = 60

HELP = """Commands:
/new — archive this conversation and start afresh
/stop — stop the running turn and its sub-agents
/model NAME — use another model in this session (no name: show it and the choices)
/help — this list"""


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    args: str


@dataclass(frozen=True, slots=True)
class _Context:
    session: Session
    conf: AgentSettings
    current_run: UUID | None = None
    # Who sent it: in a team chat, the member whose budget and rate a summary counts on.
    sender_id: int | None = None


def parse(content: str) -> Command | None:
    """A known command, or None: other text that starts with `/` (a path, say) is a message."""
    name, _, args = content.strip().partition(" ")
    name = name.lower()
    return Command(name, args.strip()) if name in _HANDLERS else None


def is_command(content: str) -> bool:
    """Whether `content` is a slash command: answered with text, at no model call."""
    return parse(content) is not None


async def dispatch(
    command: Command,
    *,
    session: Session,
    conf: AgentSettings,
    current_run: UUID | None = None,
    sender_id: int | None = None,
) -> str:
    """Answer `command`, sent by user `sender_id`. `current_run` is the record the command
    itself was given, if any."""
    context = _Context(session, conf, current_run, sender_id)
    return await _HANDLERS[command.name](command.args, context)


async def _help(args: str, ctx: _Context) -> str:
    return HELP


async def _new(args: str, ctx: _Context) -> str:
    # Waits for a running turn to finish, so that its messages are archived with the rest.
    async with session_lock(ctx.session.pk, lock_dir=ctx.conf.data_dir / "locks"):
        await end_waiting(reason="stopped", session_id=ctx.session.pk)
        model = _current_model(ctx)
        counted = ctx.current_run is not None
        if model and not await _may_summarise(ctx.session, ctx.sender_id, counted=counted):
            model = ""  # archived as it was said, with no model call
        try:
            # A consolidation running in the worker finishes first, then the rest is archived.
            await consolidation.consolidate_session(
                ctx.session.pk, model=model, conf=ctx.conf, everything=True, wait=NEW_WAIT_SECONDS
            )
        except Exception:  # the conversation is cleared all the same, its messages kept
            logger.exception("could not archive %s into memory", ctx.session.key)
        count = await store.archive_messages(session=ctx.session)
    return f"New conversation started ({count} messages archived)."


async def _may_summarise(session: Session, sender_id: int | None, *, counted: bool) -> bool:
    """Whether `/new` may ask the model for a summary: the owner's budget is not spent, and
    the summary, a model call their message causes, has a place in their turn rate as a turn
    would (else `/new` would be a way around the rate). A command that came as a run of its
    own (a task, a cron run) was `counted` when it was queued; the command line is the
    operator's own, and is not limited. The command itself is never refused: without a
    summary, the conversation is archived as it was said."""
    owner_id = session.owner_id or sender_id
    if owner_id is None:
        return True
    if (await on_db(spending.state_of)(owner_id)).exceeded:
        return False
    if counted or session.channel == CLI_CHANNEL:
        return True
    return await asyncio.to_thread(ratelimit.take_turn_slot, owner_id) is None


async def _stop(args: str, ctx: _Context) -> str:
    # This process's turns stop here, other processes' when the channel layer tells them
    # (or, should it lose the message, when they next poll their runs' flags).
    asked, running = await store.request_stop(session_id=ctx.session.pk, exclude=ctx.current_run)
    # A turn waiting for a person runs nowhere: it ends here.
    asked += len(await end_waiting(reason="stopped", session_id=ctx.session.pk))
    stopped = max(asked, cancel_running(ctx.session.pk))
    await announce_stop(running)
    if not stopped:
        return "No running task to stop."
    return f"Stopped {stopped} task{'s' if stopped != 1 else ''}."


async def _model(args: str, ctx: _Context) -> str:
    if args:
        # Refused with the list of allowed ids, like a model asked for through any door.
        model = allowed_model(args, ctx.conf)
        await store.set_session_model(session=ctx.session, model=model)
        return f"This session now uses {model}."
    current = _current_model(ctx)
    if not current:
        return "No model is set (AGENT_MODEL is empty)."
    if len(ctx.conf.models) < 2:
        return f"Model: {current}"
    return f"Model: {current}\nAvailable: {allowed_models_text(ctx.conf)}"


async def choose_session_model(*, session_id: int, model: object, owner: Person = None) -> str:
    """Store `model` as the session's choice, where `/model NAME` stores it; an id the
    operator, or the `owner`'s policy, does not allow is refused (`InvalidInput`) and nothing
    is stored."""
    if not isinstance(model, str):
        raise InvalidInput("send the model's id as text", field="model")
    chosen = allowed_model(model.strip(), await person_settings(owner))
    session = await store.get_session(session_id=session_id)
    if session is None:
        raise SessionGone()
    try:
        await store.set_session_model(session=session, model=chosen)
    except SessionDeleted:
        raise SessionGone() from None
    return chosen


def model_in_use(stored: str, conf: AgentSettings | None = None) -> str:
    """The model the next turn of a session whose choice is `stored` talks to: that choice
    while the operator (and the person's policy, in `conf`) still allows it, else the default
    (as `choose_model` decides, quietly)."""
    conf = conf or agent_settings()
    return stored if stored and stored in conf.models else conf.model


def _current_model(ctx: _Context) -> str:
    """What the session's next turn talks to; empty with no model configured."""
    try:
        return choose_model(None, ctx.session.model, ctx.conf, key=ctx.session.key)
    except TurnError:
        return ""


_HANDLERS: dict[str, Callable[[str, _Context], Awaitable[str]]] = {
    "/help": _help,
    "/new": _new,
    "/stop": _stop,
    "/model": _model,
}
