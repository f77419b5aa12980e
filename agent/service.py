"""The turn service: the one call every door makes.

`run_turn` validates the message, answers slash commands, serialises turns per session,
loads and trims the history, builds the context, runs the loop, saves every message as it
is produced, and records the run. Doors translate their protocol into this call and the
events it emits back into their protocol; none of them holds agent logic.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import User
from django.utils import timezone

from agent import budget, commands, context, store
from agent.concurrency import session_lock, tracked
from agent.conf import AgentSettings, agent_settings
from agent.errors import ModelNotConfigured, SessionGone, validate_content, validate_model_name
from agent.events import Emit, MessageEvent, ThinkingFinished, ThinkingStarted, discard
from agent.llm import LLM, LLMConfig
from agent.loop import AgentLoop, LoopResult
from agent.message_log import MessageLog
from agent.tools import Limits, build_registry
from agent.tools.registry import ToolRegistry
from agent.watch import watch_run
from sessions_app.models import Run, Session
from sessions_app.services import SessionDeleted

logger = logging.getLogger(__name__)

STOPPED_TEXT = "Stopped."

_closing: set[asyncio.Future[Any]] = set()


@dataclass
class TurnResult:
    session_key: str
    text: str
    status: str
    run_id: str | None = None
    iterations: int = 0
    tools_used: list[str] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    error_kind: str | None = None

    @property
    def success(self) -> bool:
        return self.status == Run.Status.SUCCEEDED


async def run_turn(
    session_key: str,
    content: str,
    *,
    channel: str,
    emit: Emit = discard,
    model: str | None = None,
    owner: User | None = None,
    run: Run | None = None,
    session_id: int | None = None,
) -> TurnResult:
    """Run one turn of `owner`'s session `session_key` with the user's `content`; events go
    to `emit`. Without an owner the turn runs in the ownerless session of that key.

    `run` is a queued run record made earlier (a task the API handed out); without one,
    the turn makes its own. `session_id` binds the turn to one session (a socket's): if it
    was deleted meanwhile, the turn refuses rather than starting a new conversation.
    """
    validate_content(content)
    if model:
        validate_model_name(model)
    session = await _session_for(session_key, owner, run.session_id if run else session_id)
    try:
        return await _run(session, content, channel=channel, emit=emit, model=model, run=run)
    except SessionDeleted:
        raise SessionGone() from None


async def _session_for(key: str, owner: User | None, bound: int | None) -> Session:
    if bound is None:
        return await store.get_or_create_session(key=key, owner=owner)
    session = await store.get_session(session_id=bound)
    if session is None:
        raise SessionGone()
    if session.key != key or session.owner_id != (owner.pk if owner else None):
        raise ValueError(f"session {bound} is not {owner}'s session {key}")
    return session


async def _run(
    session: Session, content: str, *, channel: str, emit: Emit, model: str | None, run: Run | None
) -> TurnResult:
    conf = agent_settings()
    command = commands.parse(content)
    if command is not None:
        text = await commands.dispatch(
            command, session=session, conf=conf, current_run=run.pk if run else None
        )
        await emit(MessageEvent(role="assistant", content=text))
        if run is not None:
            await store.finish_run(run=run, status=Run.Status.SUCCEEDED, text=text)
        return TurnResult(
            session_key=session.key,
            text=text,
            status=Run.Status.SUCCEEDED,
            run_id=str(run.pk) if run else None,
        )

    model_id = model or session.model or conf.model
    if not model_id:
        raise ModelNotConfigured()
    async with session_lock(session.pk, lock_dir=conf.data_dir / "locks"):
        with tracked(session.pk):
            if run is None:
                run = await store.start_run(
                    session=session, channel=channel, prompt=content, model=model_id
                )
            else:
                started = await store.begin_run(run_id=run.pk, model=model_id)
                if started is None:  # cancelled while it waited for the lock or a worker
                    await store.cancel_run(run_id=run.pk)
                    return TurnResult(session.key, STOPPED_TEXT, Run.Status.CANCELLED, str(run.pk))
                run = started
            return await _run_locked(session, run, content, emit=emit, model=model_id, conf=conf)


async def _run_locked(
    session: Session, run: Run, content: str, *, emit: Emit, model: str, conf: AgentSettings
) -> TurnResult:
    # History is everything saved before this turn's own user message.
    raw_history = await store.recent_messages(
        session=session, limit=conf.memory_window, before_run=run.pk
    )
    run_id = str(run.id)
    await emit(ThinkingStarted(run_id=run_id))
    # The user's words as stored: other tabs show them, and a page that was still loading
    # its history when the message left gets it back.
    await emit(MessageEvent(role="user", content=content, run_id=run_id))

    log = MessageLog(session, run)
    save = log.add
    turn = asyncio.current_task()
    assert turn is not None  # run_turn is always awaited inside a task
    unwatch = watch_run(run.pk, turn)
    loop: AgentLoop | None = None
    try:
        await save({"role": "user", "content": content}, None)
        tools = build_tools(conf)
        llm = LLM(_llm_config(conf, model))
        system = {
            "role": "system",
            "content": context.system_prompt(workspace=conf.workspace, tool_names=tools.names()),
        }
        user = context.user_message(content, now=timezone.localtime())
        history = await _fit_history(raw_history, llm, conf, system, user, tools)
        loop = AgentLoop(
            llm=llm, tools=tools, emit=emit, max_iterations=conf.max_iterations, on_message=save
        )
        outcome = await loop.run(system, history, user)
        await log.flush()
    except asyncio.CancelledError:
        unwatch()  # it must not cancel the turn a second time while it closes
        # What the turn did before the stop still counts: iterations, tools, tokens.
        stopped = loop.result if loop is not None else LoopResult("", "failed", 0)
        stopped.text = STOPPED_TEXT
        # Closing the record must finish even if another cancel arrives meanwhile; the loop
        # keeps only weak references to tasks, so this one is held until it is done.
        closing = asyncio.ensure_future(_close(run, emit, stopped, log=log, cancelled=True))
        _closing.add(closing)
        closing.add_done_callback(_closing.discard)
        # The session's lock is held until the record is closed and every message saved,
        # also when a second stop arrives meanwhile: the next turn must find them all.
        while not closing.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(closing)
        raise
    except SessionDeleted:
        # Deleted with its run and messages while the turn ran: nothing is left to record,
        # and the door says why the turn ended (`run_turn` raises SessionGone).
        unwatch()
        await emit(ThinkingFinished(run_id=run_id))
        raise
    except Exception as exc:  # a bug of ours must still end the run and reach the user as text
        logger.exception("turn %s of %s crashed", run_id, session.key)
        outcome = LoopResult(
            text=f"Sorry, the turn failed: {type(exc).__name__}: {exc}",
            status="failed",
            iterations=0,
            error=f"{type(exc).__name__}: {exc}",
            error_kind="internal",
        )
    finally:
        unwatch()
    return await _close(run, emit, outcome, log=log)


async def _close(
    run: Run, emit: Emit, outcome: LoopResult, *, log: MessageLog, cancelled: bool = False
) -> TurnResult:
    # The record is closed after the messages it counts are saved, and is closed whatever
    # became of them. A session deleted meanwhile has nothing left to close: `finish_run`
    # then updates nothing.
    try:
        await log.flush()
    except SessionDeleted:
        logger.info("the session of run %s was deleted while it ran", run.pk)
    except Exception:
        logger.exception("a message of run %s could not be saved", run.pk)
    status = Run.Status.CANCELLED if cancelled else outcome.status
    await store.finish_run(
        run=run,
        status=status,
        text=outcome.text,
        error=outcome.error or ("stopped by the user" if cancelled else None),
        iterations=outcome.iterations,
        tools_used=outcome.tools_used,
        usage=outcome.usage,
        cost=outcome.cost,
    )
    run_id = str(run.id)
    await emit(ThinkingFinished(run_id=run_id))
    if not cancelled:  # a stopped turn has no reply; the /stop answer says what happened
        await emit(MessageEvent(role="assistant", content=outcome.text, run_id=run_id))
    return TurnResult(
        session_key=run.session.key,
        text=outcome.text,
        status=status,
        run_id=run_id,
        iterations=outcome.iterations,
        tools_used=outcome.tools_used,
        usage=outcome.usage,
        error=outcome.error,
        error_kind=outcome.error_kind,
    )


async def _fit_history(
    raw: list[dict[str, Any]],
    llm: LLM,
    conf: AgentSettings,
    system: dict[str, Any],
    user: dict[str, Any],
    tools: ToolRegistry,
) -> list[dict[str, Any]]:
    history = budget.repair(raw)
    window = await llm.context_window()
    fixed = budget.estimate_tokens([system, user]) + budget.estimate_tokens(tools.definitions())
    return budget.trim_history(history, window - conf.max_tokens - fixed)


def build_tools(conf: AgentSettings) -> ToolRegistry:
    conf.workspace.mkdir(parents=True, exist_ok=True)
    return build_registry(
        workspace=conf.workspace,
        restrict_to_workspace=conf.restrict_to_workspace,
        exec_timeout=conf.exec_timeout,
        exec_env=conf.exec_env,
        exec_limits=Limits(
            max_processes=conf.exec_max_processes,
            memory_mb=conf.exec_memory_mb,
            network=conf.exec_network,
        ),
    )


def _llm_config(conf: AgentSettings, model: str) -> LLMConfig:
    return LLMConfig(
        model=model,
        api_base=conf.api_base,
        api_key=conf.api_key,
        temperature=conf.temperature,
        max_tokens=conf.max_tokens,
        context_window=conf.context_window,
        timeout=conf.llm_timeout,
        max_retries=conf.llm_max_retries,
        retry_budget=conf.llm_retry_budget,
        backend=conf.llm_backend,
        openai_base=conf.openai_base_url,
        openai_key=conf.openai_api_key,
    )
