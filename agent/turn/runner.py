"""One turn, from the moment it holds its session's lock to its closed run record.

`TurnRunner` gathers the turn's parts (history, tools bound to the turn, the model, the
prompt, `agent.turn.prompt`), runs the loop, and closes the record however the turn ends
(`agent.turn.closing`): finished, stopped, crashed, with its session deleted under it, or
waiting for a person (`agent.turn.waiting`), from where a runner of the same run goes on
once the answers are in.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

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
from agent.tools.guards.folders import make_folder
from agent.tools.hooks import TurnHooks
from agent.turn import (
    attachments,
    client_turn,
    closing,
    consolidation,
    live,
    prompt,
    store,
    waiting,
)
from agent.turn.approvals import carried_approvals, gate_for
from agent.turn.delivery import Delivery, RepeatScreen
from agent.turn.heartbeat_watch import HeartbeatWatch
from agent.turn.locks import lost_lock
from agent.turn.message_log import MessageLog
from agent.turn.model_config import llm_config
from agent.turn.options import TurnOptions, restrict, tools_of
from agent.turn.outcome import RunRecorded, TurnResult
from agent.turn.owner_schedules import OwnerSchedules
from agent.turn.profiles import profile_for
from agent.turn.rooms import Room
from agent.turn.spending import TurnSpending, spending_of
from agent.turn.subagents import SYSTEM_CHANNEL, SessionAgents
from agent.turn.toolbox import not_theirs, turn_hooks, turn_registry
from agent.turn.trace import TraceRecorder
from agent.turn.watch import watch_run
from sessions_app.models import Run, Session
from sessions_app.people import person
from sessions_app.services import SessionDeleted, TurnSuperseded
from skills_app.entries import SkillEntry

logger = logging.getLogger(__name__)


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
        room: Room,
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
        # Every turn of a user, whichever door or job started it, works in their folder;
        # a team chat's, in the team's (`rooms`).
        self.room = room
        self.folder = room.folder
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
        limits (`heartbeat_watch`), which it would otherwise pass, since what the file asks
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
        author = person(self.owner) if self.owner is not None else None
        await self.emit(
            ThinkingStarted(run_id=self.run_id, model=self.model or None, author=author)
        )
        # A turn that goes on from its client's results has its user message already.
        fresh = self.resuming is None and self.options.continuation is None
        said = attachments.stored_text(self.content, self.options.files)
        if self.resuming is not None:
            await waiting.announce_answers(self.resuming, self.emit)
        elif fresh:
            # The user's words as stored: other tabs show them, and a page that was still
            # loading its history when the message left gets it back. A system announcement
            # is the model's input but no one's words: clients show it as a note.
            role = "system" if self.run.channel == SYSTEM_CHANNEL else "user"
            await self.emit(
                MessageEvent(
                    role=role,
                    content=said,
                    run_id=self.run_id,
                    author=author if role == "user" else None,
                )
            )
        task = asyncio.current_task()
        assert task is not None  # a turn is always awaited inside a task
        unwatch = watch_run(self.run.pk, task)
        try:
            if fresh:
                await self.log.add({"role": "user", "content": said}, None)
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
                await self._closer().count_deleted(self.loop.result, Run.Status.FAILED)
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
        await consolidation.queue_if_due(
            self.session, self.model, window=self.conf.memory_window, history=self.history_share
        )

    async def _converse(self, raw_history: list[dict[str, Any]]) -> LoopResult:
        try:
            await asyncio.to_thread(make_folder, self.folder, sandbox_uid=self.conf.sandbox_uid)
        except GuardError as exc:
            logger.error("turn %s has no folder to work in: %s", self.run_id, exc)
            return LoopResult(text=f"Error: {exc}", status="failed", iterations=0, error=str(exc))
        fence = self.ctx.workspace
        # The heartbeat reads a person's own HEARTBEAT.md, not a team's.
        if self.owner is not None and fence is not None and self.room.team is None:
            self.heartbeat = HeartbeatWatch(
                fence.root / context.HEARTBEAT_FILE,
                limited=self._has_limits,
                record=self._record_heartbeat_limits,
            )
        registry = not_theirs(await turn_registry(self.conf), self.conf)
        hidden = self.profile.hidden_tools | self.room.hidden_tools
        own = restrict(registry.without(hidden), self.allowed).for_turn(self.ctx)
        tools = client_turn.with_client_tools(own, self.options)
        llm = LLM(self.options.tune(llm_config(self.conf, self.model)))
        self.endpoint = llm.config.endpoint
        direct = self.allowed is False
        skills: list[SkillEntry] = []
        system: dict[str, Any] | None
        if direct:
            # The model alone: the client's instructions are its whole system message.
            system = prompt.instructions_message(self.options)
            user = prompt.user_message(self.content, self.options, now=None)
        else:
            skills = [
                skill
                for skill in await store.offered_skills(
                    workspace=self.conf.workspace,
                    environment=self.conf.exec_env,
                    folder=self.folder,
                    shared=self.room.shared,
                )
                if skill.name not in self.conf.hidden_skills
            ]
            self.carried = carried_approvals(
                session=self.session,
                run=self.run,
                skill_tools=[name for skill in skills for name in skill.approve_tools],
            )
            text = await prompt.system_prompt(
                conf=self.conf,
                profile=self.profile,
                session=self.session,
                owner_id=self.ctx.owner_id,
                room=self.room,
                options=self.options,
                tool_names=own.names(),
                skills=skills,
            )
            system = {"role": "system", "content": text}
            # A turn that goes on after a wait keeps the clock its user's message had.
            now = timezone.localtime(self.run.started) if self.resuming else timezone.localtime()
            user = prompt.user_message(self.content, self.options, now=now)
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
            gate=client_turn.gate_with_client(
                None
                if direct
                else await gate_for(
                    conf=self.conf,
                    session=self.session,
                    owner_id=self.ctx.owner_id,
                    carried=self.carried,
                    profile=self.profile,
                    asks=self.options.history is None and not self.options.unattended,
                ),
                self.options,
            ),
            tool_choice=self.options.tool_choice,
        )
        raw_history, turn, verdicts = await client_turn.continued(
            self.session, self.run, self.options, raw_history, window=self.conf.memory_window
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
        elif self.options.continuation is not None:
            fresh = LoopResult(text="", status="succeeded", iterations=0)
            outcome = await self.loop.resume(system, history, [user, *turn], verdicts, done=fresh)
        else:
            outcome = await self.loop.run(system, history, user)
        await self.log.flush()
        return outcome

    async def _close_stopped(self) -> None:
        stopped = closing.stopped(self.loop.result if self.loop is not None else None)
        await self._close_for_sure(stopped, cancelled=True)

    def _lost(self) -> LoopResult:
        return closing.lost(self.loop.result if self.loop is not None else None)

    async def _close_for_sure(self, outcome: LoopResult, **how: bool) -> TurnResult:
        return await closing.for_sure(self._close(outcome, **how))

    async def _close(
        self, outcome: LoopResult, *, cancelled: bool = False, lost: bool = False
    ) -> TurnResult:
        await self._wrote(None)  # whatever ended the turn, even a stop mid-command
        return await self._closer().close(outcome, cancelled=cancelled, lost_lock=lost)

    def _closer(self) -> closing.RunClose:
        return closing.RunClose(
            session=self.session,
            run=self.run,
            emit=self.emit,
            conf=self.conf,
            log=self.log,
            delivery=self.delivery,
            hooks=self.hooks,
            trace=self.trace,
            exporting=self.exporting,
            done=self.loop.result if self.loop is not None else None,
            # A turn that waited may hold from before, whatever its budget is now.
            held=self.spending is not None or self.resuming is not None,
            endpoint=self.endpoint,
        )
