"""Sub-agents: agents of their own that a turn starts for one task.

A sub-agent runs as a turn of its own session (`subagent:<id>`, the parent's owner's) on the
sub-agent profile: a registry without `message`, `spawn`, `cron` and `subagent`, a prompt
of its own, no history, and `AGENT_SUBAGENT_MAX_ITERATIONS`. Its run record names the
session that started it (`Run.parent`), so `/stop` there stops it too, and how it ended
is announced there: a `subagent_completed` frame, then a short turn on the `system`
channel in which the agent tells the user what came of it.

A sub-agent's turn counts against its owner's turn rate (`ratelimit`) when it is started,
and so does the announcing turn: past the rate `spawn` and `subagent` refuse with why (the
parent turn's tool result), and the announcement is the sub-agent's answer as it gave it.
"""

from __future__ import annotations

import asyncio
import logging
import math
from uuid import UUID

from django.contrib.auth.models import User

from agent import context
from agent.events import Emit, SubagentCompleted, SubagentSpawned, discard
from agent.tools import ToolError
from agent.turn import fanout, ratelimit, store
from agent.turn.delivery import post
from agent.turn.fanout import GroupSink
from agent.turn.refusals import TurnError
from sessions_app.models import Run, Session

logger = logging.getLogger(__name__)

SYSTEM_CHANNEL = "system"
# The worker's task that runs a spawned sub-agent; named, not imported (it is a door).
RUN_TASK = "agent.doors.worker.run_subagent"
ANNOUNCE_TASK = "agent.doors.worker.announce_subagent"
# The most of a sub-agent's answer the announcing turn is given.
RESULT_CHARS = 8_000


class SessionAgents:
    """`ToolContext.agents` for a turn of `session`: sub-agents it starts report to it."""

    def __init__(self, session: Session, owner: User | None, emit: Emit, *, model: str) -> None:
        self.session = session
        self.owner = owner
        self.emit = emit
        self.model = model

    async def spawn(self, task: str, label: str) -> str:
        await self._count()
        run = await store.queue_subagent(
            parent=self.session, task=task, label=label, model=self.model
        )
        await store.enqueue(RUN_TASK, str(run.pk), task_name=f"subagent-{run.pk}")
        await self.emit(SubagentSpawned(id=str(run.pk), label=label))
        logger.info("%s spawned sub-agent %s (%s)", self.session.key, run.pk, label)
        return str(run.pk)

    async def run(self, task: str, label: str) -> str:
        await self._count()
        run = await store.queue_subagent(
            parent=self.session, task=task, label=label, model=self.model
        )
        await self.emit(SubagentSpawned(id=str(run.pk), label=label))
        status, text = await _run(run, self.owner)
        await self.emit(SubagentCompleted(id=str(run.pk), label=label, status=status))
        if status != Run.Status.SUCCEEDED:
            raise ToolError(f"the sub-agent {status}: {text}")
        return text

    async def _count(self) -> None:
        """Count the sub-agent's turn against the owner's rate, or refuse to start it."""
        if self.owner is None:
            return  # a turn of no account (the command line's): nobody's rate to count
        wait = await asyncio.to_thread(ratelimit.take, self.owner.pk)
        if wait is not None:
            raise ToolError(
                f"no sub-agent was started: {ratelimit.past_rate(self.owner.get_username())}; "
                f"try again in {math.ceil(wait)} s, or do the task yourself"
            )


async def _run(run: Run, owner: User | None) -> tuple[str, str]:
    """Run the queued sub-agent `run` to its end: its status and answer (or reason).

    The turn runs as a task of its own, so that a stop aimed at the sub-agent alone (its
    run's flag) ends that task and not the caller's; when the caller is cancelled, the
    sub-agent goes with it."""
    turn = asyncio.ensure_future(_turn(run, owner))
    try:
        return await asyncio.shield(turn)
    except asyncio.CancelledError:
        if turn.done():  # the sub-agent alone was stopped; its record says how it ended
            stopped = await store.get_run(run_id=run.pk)
            return Run.Status.CANCELLED, stopped.text if stopped and stopped.text else ""
        turn.cancel()
        await asyncio.wait([turn])
        raise


async def _turn(run: Run, owner: User | None) -> tuple[str, str]:
    from agent.turn.service import run_recorded  # the service runs sub-agents' turns too

    result = await run_recorded(run, owner=owner, emit=discard)
    return result.status, (result.text if result.success else result.error or result.text)


async def run_spawned(run_id: UUID) -> str:
    """The worker's side of `spawn`: run the sub-agent, then announce how it ended."""
    run = await store.subagent_run(run_id=run_id)
    if run is None:
        logger.warning("sub-agent %s no longer exists", run_id)
        return "missing"
    if run.status == Run.Status.QUEUED:
        await _run(run, run.session.owner)
    await announce(run_id)
    finished = await store.get_run(run_id=run_id)
    return finished.status if finished is not None else "missing"


async def announce(run_id: UUID) -> None:
    """Tell the session that started sub-agent `run_id` how it ended: a frame for its
    sockets and, unless it was stopped, a short turn in which the agent reports to the user."""
    from agent.turn.service import SessionRef, run_turn

    run = await store.subagent_run(run_id=run_id)
    if run is None or run.parent is None:
        return
    parent = run.parent
    await fanout.publish(
        parent.pk, SubagentCompleted(id=str(run.pk), label=run.label, status=run.status)
    )
    if run.status in (Run.Status.CANCELLED, Run.Status.QUEUED, Run.Status.RUNNING):
        return  # stopped: the /stop answer said so; unfinished: it is not over yet
    result = (run.text or run.error or "")[:RESULT_CHARS]
    owner = parent.owner
    if owner is not None and await asyncio.to_thread(ratelimit.take, owner.pk) is not None:
        # The agent's own words would take a turn past the owner's rate: the answer as it is.
        why = ratelimit.past_rate(owner.get_username())
        said = {"succeeded": "finished"}.get(run.status, run.status)
        await post(
            parent,
            f"The sub-agent '{run.label or 'task'}' {said}. Its answer, as it "
            f"gave it ({why}):\n\n{result or '(no answer)'}",
        )
        return
    content = context.announcement(
        label=run.label or "task", task=run.prompt[:RESULT_CHARS], status=run.status, result=result
    )
    try:
        await run_turn(
            SessionRef(parent.key, parent.owner, parent.pk),
            content,
            channel=SYSTEM_CHANNEL,
            emit=GroupSink(parent.pk),
        )
    except TurnError as exc:  # the parent was deleted, or has no model any more
        logger.info("could not announce sub-agent %s to %s: %s", run_id, parent.key, exc)
