"""The turn service: the one call every door makes.

`run_turn` validates the message, answers slash commands, serialises turns per session and
hands the turn to a `TurnRunner` (history, context, loop, saved messages, run record).
`run_queued` does the same for a turn recorded earlier as a queued run (an API task), and
`resume_turn` for a turn that waited for a person, once its answers are in.
Doors translate their protocol into one of these calls and the events back into their
protocol; none of them holds agent logic.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from dataclasses import dataclass
from uuid import UUID

from django.contrib.auth.models import User

from agent.conf import AgentSettings
from agent.events import Emit, MessageEvent, ModelChosen, discard
from agent.llm import LLM
from agent.turn import client_turn, rewind, slash, store, waiting
from agent.turn.approvals import end_waiting
from agent.turn.attachments import file_parts
from agent.turn.closing import STOPPED_TEXT
from agent.turn.locks import can_be_lost, session_lock, tracked
from agent.turn.model_config import llm_config
from agent.turn.options import TurnOptions
from agent.turn.outcome import TurnResult
from agent.turn.policies import person_settings, refuse_without_models
from agent.turn.refusals import (
    AccountInactive,
    InvalidInput,
    SessionGone,
    TurnError,
    allowed_model,
    choose_model,
    validate_content,
)
from agent.turn.rooms import room_of
from agent.turn.runner import TurnRunner
from agent.turn.spending import budget_refusal
from agent.turn.toolbox import turn_registry
from sessions_app.models import Run, Session
from sessions_app.services import NoSuchChat, SessionDeleted

logger = logging.getLogger(__name__)

__all__ = [
    "SessionRef",
    "TurnResult",
    "prepare_options",
    "rerun_turn",
    "resume_turn",
    "run_queued",
    "run_recorded",
    "run_turn",
]

# How long a turn that got its session's lock gives the session's previous turn, still
# open, to end: if that turn's process lives, it notices within `locks.KEEP_SECONDS` that its
# lock was lost and stops.
TAKEOVER_SECONDS = 2.0
TAKEOVER_POLL_SECONDS = 0.05


@dataclass(frozen=True, slots=True)
class SessionRef:
    """Which conversation a turn belongs to: `key` in `owner`'s key space (the ownerless
    one for None), optionally pinned to one session row (`pinned_id`, a socket's) so that a
    session deleted and made again under the same key is not taken for it."""

    key: str
    owner: User | None = None
    pinned_id: int | None = None


async def run_turn(
    session: str | SessionRef,
    content: str,
    *,
    channel: str,
    emit: Emit = discard,
    model: str | None = None,
    options: TurnOptions | None = None,
) -> TurnResult:
    """Run one turn of `session` (a key of the ownerless sessions, or a `SessionRef`) with
    the user's `content`; events go to `emit`. `options`: what else the door asks of it
    (the tools it may use, the conversation its client sent, generation settings)."""
    validate_content(content)
    ref = session if isinstance(session, SessionRef) else SessionRef(session)
    if model:
        allowed_model(model, await person_settings(ref.owner))
    row = await _open(ref)
    try:
        return await _run(
            row, ref.owner, content, channel=channel, emit=emit, model=model, options=options
        )
    except SessionDeleted:
        raise SessionGone() from None


async def rerun_turn(
    session: SessionRef,
    *,
    channel: str,
    emit: Emit = discard,
    message_id: int | None = None,
    run_id: UUID | None = None,
    content: str | None = None,
) -> TurnResult:
    """Run `session`'s conversation again from one of the user's messages (`rewind`):
    message `message_id`, or the one that started run `run_id`, or (neither) the user's
    latest, which regenerates the last reply. That message and everything after it are
    archived (`archived` event) and the message runs again as a new turn, in its own words
    or in `content`, its edited text.

    Refused with a `TurnError` when a turn of the session runs or waits for a person
    (`rewind.TurnBusy`),
    when there is no such message, or it is not the user's, and when `content` breaks the
    rules of a message or is a slash command."""
    if content is not None:
        validate_content(content)
        if slash.is_command(content):
            raise InvalidInput("an edited message cannot be a command; send the command instead")
    row = await _open(session)
    start = await rewind.starting_point(
        row, message_id=message_id, run_id=run_id, requester=session.owner
    )
    await rewind.refuse_if_busy(row)
    text = start.content if content is None else content
    try:
        return await _run(
            row, session.owner, text, channel=channel, emit=emit, model=None, rerun_from=start
        )
    except SessionDeleted:
        raise SessionGone() from None


async def run_queued(
    run: Run, *, owner: User | None, emit: Emit = discard, reply_to: Session | None = None
) -> TurnResult:
    """Run the turn recorded as the queued `run` (its session loaded), as its `owner`;
    `reply_to` is the conversation its answer goes to when not its own (a cron job's)."""
    if await store.get_session(session_id=run.session_id) is None:
        raise SessionGone()  # deleted, with the run, while the task waited
    try:
        return await _run(
            run.session,
            owner,
            run.prompt,
            channel=run.channel,
            emit=emit,
            model=run.model or None,
            queued=run,
            reply_to=reply_to,
        )
    except SessionDeleted:
        raise SessionGone() from None


async def run_recorded(
    run: Run, *, owner: User | None, emit: Emit = discard, reply_to: Session | None = None
) -> TurnResult:
    """`run_queued` for turns the agent starts on its own (cron, sub-agents, heartbeat):
    one that cannot start (its session gone, no model) ends failed on its record too, and
    comes back as such rather than raised."""
    try:
        return await run_queued(run, owner=owner, emit=emit, reply_to=reply_to)
    except TurnError as exc:
        await store.fail_unfinished_run(run_id=run.pk, text=str(exc), error=str(exc))
        return TurnResult(run.session.key, str(exc), Run.Status.FAILED, str(run.pk), error=str(exc))


async def _open(ref: SessionRef) -> Session:
    if ref.pinned_id is None:
        try:
            return await store.get_or_create_session(key=ref.key, owner=ref.owner)
        except NoSuchChat:
            raise InvalidInput(
                f"there is no chat {ref.key} of your teams", field="session"
            ) from None
    session = await store.get_session(session_id=ref.pinned_id)
    if session is None:
        raise SessionGone()
    if session.key != ref.key:
        raise ValueError(f"session {ref.pinned_id} is not {ref.key}")
    if session.team_id is not None:
        # A member removed from the team since their socket opened sends no more.
        if not await store.is_member(
            user_id=ref.owner.pk if ref.owner else None, team_id=session.team_id
        ):
            raise SessionGone()
    elif session.owner_id != (ref.owner.pk if ref.owner else None):
        raise ValueError(f"session {ref.pinned_id} is not {ref.owner}'s session {ref.key}")
    return session


async def _run(
    session: Session,
    owner: User | None,
    content: str,
    *,
    channel: str,
    emit: Emit,
    model: str | None,
    queued: Run | None = None,
    reply_to: Session | None = None,
    options: TurnOptions | None = None,
    rerun_from: rewind.RerunFrom | None = None,
) -> TurnResult:
    # The owner's settings: the operator's narrowed by their teams' policy, read once here
    # for the whole turn, whichever door or background run started it.
    conf = await person_settings(owner)
    options = options or TurnOptions()
    command = slash.parse(content)
    if command is not None:
        sender = owner.pk if owner else None
        return await _answer(command, session, emit, queued=queued, conf=conf, sender_id=sender)

    refuse_without_models(conf)
    model_id = choose_model(model, session.model, conf, key=session.key)
    if owner is not None and not owner.is_active:
        # The doors refuse such a user already; their queued and background work, which
        # was recorded before, stops here.
        raise AccountInactive(owner.get_username())
    # Every door's turns, and the user's own work's, stop at their daily budget.
    refusal = await budget_refusal(owner)
    if refusal is not None:
        raise refusal
    options = await _client_parts(options, owner, model_id, conf)
    async with session_lock(session.pk, lock_dir=conf.data_dir / "locks"):
        with tracked(session.pk):
            await _previous_turn_ended(session)
            # A turn that waits for a person ends unanswered: this one comes first.
            await end_waiting(reason="superseded", session_id=session.pk)
            if rerun_from is not None:
                await rewind.archive_from(session, rerun_from, emit)
            if queued is None:
                run = await store.start_new_run(
                    session=session,
                    channel=channel,
                    prompt=content,
                    model=model_id,
                    tools=options.recorded_tools(),
                    replaces=None if rerun_from is None else rerun_from.message_id,
                    author_id=owner.pk if owner else None,
                )
            else:
                started = await store.start_queued_run(run_id=queued.pk, model=model_id)
                if started is None:  # cancelled while it waited for the lock or a worker
                    await store.cancel_run(run_id=queued.pk)
                    return TurnResult(
                        session.key, STOPPED_TEXT, Run.Status.CANCELLED, str(queued.pk)
                    )
                run = started
            runner = TurnRunner(
                session=session,
                owner=owner,
                run=run,
                content=content,
                emit=emit,
                model=model_id,
                conf=conf,
                room=await room_of(session, owner, conf),
                run_recorded=run_recorded,
                reply_to=reply_to,
                options=options,
            )
            result = await runner()
    await runner.consolidate_if_due()
    return result


async def prepare_options(
    options: TurnOptions, *, owner: User | None, model: str | None = None
) -> TurnOptions:
    """`options` with what a client brought checked before anything is recorded: its tools
    against the agent's own names (a clash is an `InvalidInput` naming `tools[i]`), its
    generation parameters against what the model takes, and the files of its messages
    kept and made what the model can take. A door calls it before it makes a session; the
    turn calls it again (with nothing left to keep, it only checks)."""
    if not _brought(options):
        return options
    conf = await person_settings(owner)
    return await _client_parts(options, owner, model or conf.model, conf)


def _brought(options: TurnOptions) -> bool:
    """Whether a client brought anything to check: tools beside the agent's, parameters,
    files (in the new message or the history)."""
    return bool(
        (options.client_tools and not options.direct)
        or options.params
        or options.attachments
        or options.files
        or any(file_parts(message) for message in options.history or ())
    )


async def _client_parts(
    options: TurnOptions, owner: User | None, model: str, conf: AgentSettings
) -> TurnOptions:
    if options.prepared_for == model or not _brought(options):
        return options
    if options.client_tools and not options.direct:
        client_turn.refuse_clashes(options, (await turn_registry(conf)).names())
    llm = LLM(llm_config(conf, model))
    for name in await llm.refused_params([name for name, _ in options.params]):
        raise InvalidInput(f"the model {model} does not take '{name}'", field=name)
    files = (
        options.attachments
        or options.files
        or any(file_parts(message) for message in options.history or ())
    )
    if files:
        if owner is None:
            raise InvalidInput("files are kept in a user's folder, and this turn has no user")
        options = await client_turn.prepare_files(
            options, owner=owner.get_username(), conf=conf, accepts=llm.accepts
        )
    return dataclasses.replace(options, prepared_for=model)


async def resume_turn(run_id: UUID, *, emit: Emit = discard) -> TurnResult | None:
    """Go on with the turn of the waiting run `run_id`, none of whose calls waits for an
    answer any more; events go to `emit`. None when there is nothing to go on with: it is
    not waiting or a call still is, or another process took it first."""
    run = await store.get_run(run_id=run_id)
    if run is None or run.status != Run.Status.WAITING:
        return None
    try:
        return await _resume(run, emit)
    except SessionDeleted:
        raise SessionGone() from None


async def _resume(run: Run, emit: Emit) -> TurnResult | None:
    # Whose turn it was: the member who sent it, in a team chat.
    owner = await store.author_of(run_id=run.pk)
    conf = await person_settings(owner)
    async with session_lock(run.session_id, lock_dir=conf.data_dir / "locks"):
        with tracked(run.session_id):
            await _previous_turn_ended(run.session)
            claimed = await store.resume_run(run_id=run.pk)
            if claimed is None:
                return None
            session = claimed.session
            runner = TurnRunner(
                session=session,
                owner=owner,
                run=claimed,
                content=claimed.prompt,
                emit=emit,
                model=claimed.model or choose_model(None, session.model, conf, key=session.key),
                conf=conf,
                room=await room_of(session, owner, conf),
                run_recorded=run_recorded,
                resuming=await waiting.resumption_of(claimed),
            )
            result = await runner()
    await runner.consolidate_if_due()
    return result


async def _previous_turn_ended(session: Session) -> None:
    """Wait, a little, for the session's previous turn to end, if it is still open.

    It normally ended before its lock was let go. Still open, it either died with its
    process, or it is running on after its database connection (and with it the lock) was
    dropped: it notices within `locks.KEEP_SECONDS`, stops and closes its record, and must
    not call the model beside this one meanwhile. A dead one is waited for no longer than
    `TAKEOVER_SECONDS`.
    """
    if not can_be_lost():
        return
    deadline = asyncio.get_running_loop().time() + TAKEOVER_SECONDS
    while await store.current_turn_open(session_id=session.pk):
        if asyncio.get_running_loop().time() >= deadline:
            logger.warning("the previous turn of %s is still open; this one goes on", session.key)
            return
        await asyncio.sleep(TAKEOVER_POLL_SECONDS)


async def _answer(
    command: slash.Command,
    session: Session,
    emit: Emit,
    *,
    queued: Run | None,
    conf: AgentSettings,
    sender_id: int | None,
) -> TurnResult:
    current = queued.pk if queued else None
    text = await slash.dispatch(
        command, session=session, conf=conf, current_run=current, sender_id=sender_id
    )
    if command.name == "/model" and command.args:
        # The other tabs of the chat (and this one's picker) show the new choice.
        await emit(ModelChosen(model=session.model))
    await emit(MessageEvent(role="assistant", content=text))
    if queued is not None:
        await store.finish_run(run=queued, status=Run.Status.SUCCEEDED, text=text)
    return TurnResult(
        session_key=session.key,
        text=text,
        status=Run.Status.SUCCEEDED,
        run_id=str(queued.pk) if queued else None,
    )
