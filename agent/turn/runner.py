"""One turn, from the moment it holds its session's lock to its closed run record.

`TurnRunner` gathers the turn's parts (history, tools bound to the turn, the model, the
prompt), runs the loop, and closes the record however the turn ends: finished, stopped,
crashed, with its session deleted under it, or waiting for a person (`agent.turn.waiting`),
from where a runner of the same run goes on once the answers are in.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.utils import timezone

from agent import budget, context, failures
from agent.budget import ContextBudget
from agent.conf import AgentSettings
from agent.events import Emit, MessageEvent, ThinkingFinished, ThinkingStarted
from agent.llm import LLM
from agent.loop import AgentLoop, LoopResult
from agent.tokens import TokenCounter
from agent.tools import GuardError, ToolContext, Workspace
from agent.tools.guards.folders import make_user_folder, user_folder
from agent.tools.hooks import TurnHooks
from agent.turn import consolidation, live, store, waiting
from agent.turn.approvals import carried_approvals, gate_for
from agent.turn.delivery import Delivery, RepeatScreen
from agent.turn.heartbeat_limits import HeartbeatWatch
from agent.turn.locks import lost_lock
from agent.turn.message_log import Entry, MessageLog
from agent.turn.model_config import llm_config
from agent.turn.options import TurnOptions, restrict, tools_of
from agent.turn.outcome import RunRecorded, TurnResult
from agent.turn.owner_schedules import OwnerSchedules
from agent.turn.profiles import profile_for
from agent.turn.spending import TurnSpending, spending_of
from agent.turn.subagents import SYSTEM_CHANNEL, SessionAgents
from agent.turn.toolbox import turn_hooks, turn_registry
from agent.turn.trace import TraceRecorder
from agent.turn.watch import watch_run
from sessions_app.models import Run, Session
from sessions_app.services import SessionDeleted, TurnSuperseded
from sessions_app.usage import run_usage
from skills_app.entries import SkillEntry

logger = logging.getLogger(__name__)

STOPPED_TEXT = "Stopped."
LOST_LOCK_TEXT = (
    "This turn stopped: its connection to the database was lost, and another turn of this "
    "conversation started meanwhile. Nothing more of it was saved; send your message again."
)

# Records being closed after a stop; the event loop keeps only weak references to tasks.
_closing: set[asyncio.Future[Any]] = set()


class TurnRunner:
    """Runs the turn of `run` in `session`, which the caller has locked. `run_recorded` runs
    the turns this one starts of its own (a sub-agent it waits for): the service's."""

    def __init__(
        self,
        *,
        session: Session,
        owner: User | None,
        run: Run,
        content: str,
        emit: Emit,
        model: str,
        conf: AgentSettings,
        run_recorded: RunRecorded,
        reply_to: Session | None = None,
        resuming: waiting.Resumption | None = None,
        options: TurnOptions | None = None,
    ) -> None:
        self.session = session
        # A turn that waited for a person and goes on: what it had done until then.
        self.resuming = resuming
        self.options = options or TurnOptions()
        # Read from the record, so that a queued turn keeps to what its door asked for.
        self.allowed = tools_of(run)
        self.run = run
        self.run_id = str(run.pk)
        self.content = content
        # Every event of the turn passes through it, so that a socket that opens meanwhile
        # can join the stream.
        self.live = live.LiveTurn(run.pk, emit)
        self.emit = emit = self.live.emit
        self.model = model
        self.conf = conf
        self.endpoint: str | None = None  # known once the model is set up
        # Each model call and tool call: saved with the messages unless AGENT_TRACE is off,
        # and exported when a collector is named.
        self.exporting = bool(conf.otel_endpoint or conf.otel_traces_endpoint)
        self.trace = TraceRecorder(run.trace) if conf.trace or self.exporting else None
        self.log = MessageLog(
            session,
            run,
            self.trace if conf.trace else None,
            numbered=resuming.last_seq if resuming else 0,
        )
        self.profile = profile_for(run.channel)
        # What waits for a person here beyond what every turn of the owner gets, which the
        # sub-agents and jobs the turn starts carry; the offered skills' join it once read.
        self.carried = carried_approvals(session=session, run=run)
        self.owner = owner
        owner_id = owner.pk if owner else None
        # Every turn of a user, whichever door or job started it, works in their folder.
        self.folder = user_folder(conf.workspace, owner.get_username() if owner else None)
        self.delivery = Delivery(session, owner, emit, run_id=self.run_id, home=reply_to)
        # What the model streams passes here: a reply that repeats a message the model
        # already sent this conversation is not streamed to it a second time.
        self.screen = RepeatScreen(self.delivery, emit)
        hooks = turn_hooks(conf)
        self.hooks = (
            TurnHooks(
                hooks,
                session=session.key,
                user=owner.get_username() if owner else None,
                run_id=self.run_id,
                channel=run.channel,
            )
            if hooks
            else None
        )
        limited = list(self.allowed) if isinstance(self.allowed, tuple) else None
        self.ctx = ToolContext(
            session_key=session.key,
            channel=run.channel,
            run_id=self.run_id,
            owner_id=owner_id,
            deliver=self.delivery,
            agents=None
            if self.profile.subagent
            else SessionAgents(
                session,
                owner,
                emit,
                model=model,
                run_recorded=run_recorded,
                parent_run=run.pk,
                tools=limited,
                approve_tools=lambda: self.carried,
            ),
            schedules=OwnerSchedules(
                owner_id=owner_id,
                session_key=session.key,
                tools=limited,
                approve_tools=lambda: self.carried,
            )
            if self.profile.schedules
            else None,
            workspace=Workspace(self.folder, restrict=conf.restrict_to_workspace),
            hooks=self.hooks,
            wrote=self._wrote if owner is not None else None,
        )
        self.loop: AgentLoop | None = None
        # Its user's HEARTBEAT.md, watched from when the turn starts to work in their folder.
        self.heartbeat: HeartbeatWatch | None = None
        # What the loop asks before and after each model call while a budget applies.
        self.spending: TurnSpending | None = None
        # What the history cost of what a model call may send, once the turn has started.
        self.history_share: tuple[int, int] | None = None

    async def _wrote(self, path: Path | None) -> None:
        """A tool of the turn wrote `path` (None: a command, which may have written
        anything): the heartbeat's watch looks at its file."""
        if self.heartbeat is not None:
            try:
                await self.heartbeat.look(path)
            except Exception:  # the tool's own answer stands; the turn's end looks again
                logger.exception("run %s could not record the heartbeat's limits", self.run_id)

    async def _record_heartbeat_limits(self) -> None:
        """The user's HEARTBEAT.md changed in this turn: the heartbeat keeps to this turn's
        limits (`heartbeat_limits`), which it would otherwise pass, since what the file asks
        for runs later, on its own, with no one to ask."""
        if self.owner is None:
            return
        tools = list(self.allowed) if isinstance(self.allowed, tuple) else None
        await store.set_heartbeat_limits(
            user_id=self.owner.pk, tools=tools, approve_tools=list(self.carried)
        )

    def _has_limits(self) -> bool:
        return isinstance(self.allowed, tuple) or bool(self.carried)

    async def __call__(self) -> TurnResult:
        self.live.open()
        try:
            return await self._turn()
        finally:
            await asyncio.shield(self.live.close())

    async def _turn(self) -> TurnResult:
        # History is everything saved before this turn's own user message, unless the door's
        # client sent the conversation itself.
        if self.options.history is not None:
            history = list(self.options.history)
        elif self.profile.history:
            history = await store.recent_messages(
                session=self.session, limit=self.conf.memory_window, before_run=self.run.pk
            )
        else:
            history = []
        await self.emit(ThinkingStarted(run_id=self.run_id))
        if self.resuming is not None:
            await waiting.announce_answers(self.resuming, self.emit)
        else:
            # The user's words as stored: other tabs show them, and a page that was still
            # loading its history when the message left gets it back. A system announcement
            # is the model's input but no one's words: clients show it as a note.
            role = "system" if self.run.channel == SYSTEM_CHANNEL else "user"
            await self.emit(MessageEvent(role=role, content=self.content, run_id=self.run_id))
        task = asyncio.current_task()
        assert task is not None  # a turn is always awaited inside a task
        unwatch = watch_run(self.run.pk, task)
        try:
            if self.resuming is None:
                await self.log.add({"role": "user", "content": self.content}, None)
                # Once a turn: one that waited for a person goes on, it does not start again.
                if self.hooks is not None:
                    await self.hooks.turn_start(self.content)
            outcome = await self._converse(history)
        except asyncio.CancelledError:
            unwatch()  # it must not cancel the turn a second time while it closes
            self.ctx.cancelled.set()
            if lost_lock():
                # Not a stop: the session's lock went to another turn, which now owns the
                # conversation. This one fails, and says so, but saves nothing more.
                task.uncancel()
                return await self._close_for_sure(self._lost(), lost=True)
            await self._close_stopped()
            raise
        except TurnSuperseded:
            # The same, found by a write: another turn of the session started since.
            unwatch()
            self.ctx.cancelled.set()
            return await self._close_for_sure(self._lost(), lost=True)
        except SessionDeleted:
            # Deleted with its run and messages while the turn ran: only what it cost is
            # left to record, and the door says why the turn ended.
            unwatch()
            if self.loop is not None:
                await self._count_deleted(self.loop.result, Run.Status.FAILED)
            await self.emit(ThinkingFinished(run_id=self.run_id))
            raise
        except Exception:  # a bug of ours must still end the run and reach the user
            ref = failures.log_failure(
                logger, "turn %s of %s crashed", self.run_id, self.session.key
            )
            outcome = LoopResult(
                text=failures.internal_error(ref),
                status="failed",
                iterations=0,
                error=f"internal error (reference {ref})",
                error_kind="internal",
            )
        finally:
            unwatch()
            self.ctx.cancelled.set()
        return await self._close(outcome)

    async def consolidate_if_due(self) -> None:
        """Queue the session's consolidation if it has grown enough. Called once the
        session's lock is released: nothing here may hold up the next turn. A turn that
        reads no history (a sub-agent's, a heartbeat's) leaves nothing worth remembering."""
        if self.history_share is None or not self.profile.history:
            return
        try:
            tokens, limit = self.history_share
            crowded = await store.more_unconsolidated_than(
                session_id=self.session.pk, count=self.conf.memory_window
            )
            if consolidation.due(crowded=crowded, history_tokens=tokens, limit=limit):
                await sync_to_async(consolidation.queue)(self.session.pk, self.model)
        except Exception:  # the reply is out; memory can wait for the next turn
            logger.exception("could not queue the consolidation of %s", self.session.key)

    async def _converse(self, raw_history: list[dict[str, Any]]) -> LoopResult:
        owner = self.owner.get_username() if self.owner else None
        try:
            await asyncio.to_thread(
                make_user_folder, self.conf.workspace, owner, sandbox_uid=self.conf.sandbox_uid
            )
        except GuardError as exc:
            logger.error("turn %s of %s has no folder to work in: %s", self.run_id, owner, exc)
            return LoopResult(text=f"Error: {exc}", status="failed", iterations=0, error=str(exc))
        fence = self.ctx.workspace
        if self.owner is not None and fence is not None:
            self.heartbeat = HeartbeatWatch(
                fence.root / context.HEARTBEAT_FILE,
                limited=self._has_limits,
                record=self._record_heartbeat_limits,
            )
        registry = await turn_registry(self.conf)
        tools = restrict(registry.without(self.profile.hidden_tools), self.allowed).for_turn(
            self.ctx
        )
        llm = LLM(self.options.tune(llm_config(self.conf, self.model)))
        self.endpoint = llm.config.endpoint
        direct = self.allowed is False
        skills: list[SkillEntry] = []
        system: dict[str, Any] | None
        if direct:
            # The model alone: the client's instructions are its whole system message.
            system = self._instructions_message()
            user = {"role": "user", "content": self.content}
        else:
            skills = await store.offered_skills(
                workspace=self.conf.workspace, environment=self.conf.exec_env, folder=self.folder
            )
            self.carried = carried_approvals(
                session=self.session,
                run=self.run,
                skill_tools=[name for skill in skills for name in skill.approve_tools],
            )
            system = {"role": "system", "content": await self._system_prompt(tools.names(), skills)}
            # A turn that goes on after a wait keeps the clock its user's message had.
            now = timezone.localtime(self.run.started) if self.resuming else timezone.localtime()
            user = context.user_message(self.content, now=now)
        counter = TokenCounter(self.model)
        reserve = await llm.output_tokens() + counter.payload(tools.definitions())
        fitter = ContextBudget(window=await llm.context_window(), reserve=reserve, counter=counter)
        self.spending = await spending_of(llm, self.ctx.owner_id, hold_id=self.run.pk)
        self.loop = AgentLoop(
            llm=llm,
            tools=tools,
            emit=self.screen,
            max_iterations=1
            if direct
            else self.conf.subagent_max_iterations
            if self.profile.subagent
            else self.conf.max_iterations,
            budget=fitter,
            on_message=self.log.add,
            steps=self.trace,
            spending=self.spending,
            gate=None
            if direct
            else await gate_for(
                conf=self.conf,
                session=self.session,
                owner_id=self.ctx.owner_id,
                carried=self.carried,
                profile=self.profile,
                asks=self.options.history is None,
            ),
        )
        # A turn that crashed or was stopped mid-tool may have left a call without its
        # result, or the reverse; a provider would refuse either.
        history = budget.repair(raw_history)
        self.history_share = (counter.messages(history), fitter.limit)
        if self.resuming is not None:
            outcome = await self.loop.resume(
                system,
                history,
                [user, *self.resuming.messages[1:]],
                waiting.verdicts_of(self.resuming, self.conf),
                done=self.resuming.done,
            )
        else:
            outcome = await self.loop.run(system, history, user)
        await self.log.flush()
        return outcome

    def _instructions_message(self) -> dict[str, Any] | None:
        text = self.options.instructions
        return {"role": "system", "content": text} if text.strip() else None

    async def _system_prompt(self, tool_names: list[str], skills: list[SkillEntry]) -> str:
        if self.profile.subagent:
            return context.subagent_prompt(workspace=self.folder, tool_names=tool_names)
        remembered = await store.long_term_memory(owner_id=self.ctx.owner_id)
        # The summary is of the stored history, which a client that sends its own does not
        # continue.
        summary = (
            await store.latest_summary(session_id=self.session.pk)
            if self.options.history is None
            else ""
        )
        return context.system_prompt(
            workspace=self.conf.workspace,
            folder=self.folder,
            tool_names=tool_names,
            sections=[
                *context.memory_sections(long_term=remembered, summary=summary),
                *context.skills_sections(skills),
                context.client_instructions(self.options.instructions),
            ],
        )

    async def _close_stopped(self) -> None:
        # What the turn did before the stop still counts: iterations, tools, tokens.
        stopped = self.loop.result if self.loop is not None else LoopResult("", "failed", 0)
        stopped.text = STOPPED_TEXT
        await self._close_for_sure(stopped, cancelled=True)

    def _lost(self) -> LoopResult:
        """The outcome of a turn another turn of its session overtook: what it did before
        still counts, but it failed."""
        done = self.loop.result if self.loop is not None else LoopResult("", "failed", 0)
        return LoopResult(
            text=LOST_LOCK_TEXT,
            status="failed",
            iterations=done.iterations,
            tools_used=done.tools_used,
            usage=done.usage,
            cost=done.cost,
            error="lost the session's lock to another turn",
            error_kind="lost_lock",
        )

    async def _close_for_sure(self, outcome: LoopResult, **how: bool) -> TurnResult:
        """Close the record even if another cancel arrives meanwhile: the session's lock is
        held until it is closed, and the next turn must find every message saved."""
        closing = asyncio.ensure_future(self._close(outcome, **how))
        _closing.add(closing)
        closing.add_done_callback(_closing.discard)
        while not closing.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(closing)
        return closing.result()

    async def _close(
        self, outcome: LoopResult, *, cancelled: bool = False, lost: bool = False
    ) -> TurnResult:
        # The record is closed after the messages it counts are saved, and is closed whatever
        # became of them. A session deleted meanwhile has nothing left to close: `finish_run`
        # then updates nothing.
        await self._wrote(None)  # whatever ended the turn, even a stop mid-command
        messages: list[Entry] = []
        try:
            messages = await self.log.held()
        except SessionDeleted:
            logger.info("the session of run %s was deleted while it ran", self.run_id)
        except TurnSuperseded:
            outcome, cancelled, lost = self._lost(), False, True
        except Exception:
            logger.exception("a message of run %s could not be saved", self.run_id)
        if lost:
            # What it still held (its answer, or the part of one it was cut off in) came
            # after it lost the lock: saving it could interleave with the next turn's.
            messages = []
        status: str = Run.Status.CANCELLED if cancelled else outcome.status
        if status == Run.Status.WAITING:
            return await self._wait(outcome, messages)
        try:
            await self._finish(outcome, status, messages, cancelled=cancelled)
        except SessionDeleted:
            logger.info("the session of run %s was deleted as it ended", self.run_id)
            await self._count_deleted(outcome, status, cancelled=cancelled)
        except TurnSuperseded:
            # Overtaken between its last write and its end: the run closes, without them.
            outcome, status, cancelled = self._lost(), Run.Status.FAILED, False
            await self._finish(outcome, status, [], cancelled=False)
        used = run_usage(self.run)
        await self.emit(ThinkingFinished(run_id=self.run_id, usage=used))
        succeeded = status == Run.Status.SUCCEEDED
        # A stopped turn has no reply (the /stop answer says what happened). A reply is not
        # sent twice: not when the model already sent these very words here as a message.
        here = self.delivery.home is self.session
        if not cancelled and not (succeeded and here and self.delivery.repeats(outcome.text)):
            await self.emit(
                MessageEvent(role="assistant", content=outcome.text, run_id=self.run_id, usage=used)
            )
        if self.exporting:  # after the answer, which the spans must not hold up
            await asyncio.to_thread(self._export, outcome, str(status))
        if self.hooks is not None:
            # After the run is recorded and its answer sent: a slow hook delays neither.
            await self.hooks.turn_end(
                status=str(status),
                text=outcome.text,
                error=outcome.error,
                iterations=outcome.iterations,
                tools_used=outcome.tools_used,
            )
        return TurnResult(
            session_key=self.session.key,
            text=outcome.text,
            status=status,
            run_id=self.run_id,
            iterations=outcome.iterations,
            tools_used=outcome.tools_used,
            usage=outcome.usage,
            error=outcome.error,
            error_kind=outcome.error_kind,
            delivered=succeeded and bool(self.delivery.said),
            endpoint=self.endpoint,
        )

    async def _wait(self, outcome: LoopResult, messages: list[Entry]) -> TurnResult:
        """Leave the run waiting for a person's answers, and ask every socket of the
        session; a turn stopped meanwhile ends stopped instead."""
        try:
            # Its trace so far is kept with it: the turn's ending records the rest.
            trace = self.trace.everything() if self.trace is not None and self.conf.trace else None
            asked = await waiting.park(self.run, outcome, messages, conf=self.conf, trace=trace)
        except SessionDeleted:
            logger.info("the session of run %s was deleted as it began to wait", self.run_id)
            asked = None
        except TurnSuperseded:
            lost = self._lost()
            await self._finish(lost, Run.Status.FAILED, [], cancelled=False)
            await self.emit(ThinkingFinished(run_id=self.run_id))
            return TurnResult(self.session.key, lost.text, Run.Status.FAILED, self.run_id)
        if asked is not None:
            for request in asked:
                await self.emit(request)
        await self.emit(ThinkingFinished(run_id=self.run_id))
        return TurnResult(
            session_key=self.session.key,
            text="" if asked is not None else STOPPED_TEXT,
            status=Run.Status.WAITING if asked is not None else Run.Status.CANCELLED,
            run_id=self.run_id,
            iterations=outcome.iterations,
            tools_used=outcome.tools_used,
            usage=outcome.usage,
            pending=[
                {"id": request.id, "name": request.name, "arguments": request.arguments}
                for request in asked or []
            ],
        )

    async def _finish(
        self, outcome: LoopResult, status: str, messages: list[Entry], *, cancelled: bool
    ) -> None:
        await store.finish_run(
            run=self.run,
            status=status,
            text=outcome.text,
            error=outcome.error or ("stopped by the user" if cancelled else None),
            iterations=outcome.iterations,
            tools_used=outcome.tools_used,
            usage=outcome.usage,
            cost=outcome.cost,
            messages=messages,
            trace=self.trace.everything() if self.trace is not None and self.conf.trace else None,
            # A turn that waited may hold from before, whatever its budget is now.
            held=self.spending is not None or self.resuming is not None,
        )

    async def _count_deleted(
        self, outcome: LoopResult, status: str, *, cancelled: bool = False
    ) -> None:
        """A run deleted with its session while it ran: what it cost was spent all the same,
        and goes into its owner's ledger (else deleting a chat gave its turn's spending back
        once its hold expired). The run stays deleted (`finish_run`)."""
        try:
            await self._finish(outcome, status, [], cancelled=cancelled)
        except Exception:
            logger.exception("what run %s cost could not be counted", self.run_id)

    def _export(self, outcome: LoopResult, status: str) -> None:
        """The run as OpenTelemetry spans (in a thread: the SDK loads with the first)."""
        try:
            from agent.turn import telemetry
        except ImportError as exc:
            logger.warning("runs are not exported: OpenTelemetry is not installed (%s)", exc)
            return
        telemetry.export_run(
            self.run,
            session_key=self.session.key,
            status=status,
            error=outcome.error,
            error_kind=outcome.error_kind,
            usage=outcome.usage,
            cost=outcome.cost,
            steps=self.trace.everything() if self.trace is not None else [],
            conf=self.conf,
        )
