"""Sub-agents: agents of their own that a turn starts for one task.

A sub-agent runs as a turn of its own session (`subagent:<id>`, the parent's owner's) on the
sub-agent profile: a registry without `message`, `spawn`, `cron` and `subagent`, a prompt
of its own, no history, and `AGENT_SUBAGENT_MAX_ITERATIONS`. It keeps to the tools the
parent turn was limited to, and is refused the tools that waited for a person there
(`approvals.carried_approvals`): no one is there to ask. Its run record names the
session that started it (`Run.parent`), so `/stop` there stops it too, and how it ended
is announced there (`subagent_runs`): a `subagent_completed` frame, then a short turn on
the `system` channel in which the agent tells the user what came of it.

A sub-agent's turn counts against its owner's turn rate (`ratelimit`) when it is started,
and so does the announcing turn: past the rate, or past the owner's daily budget
(`spending`), `spawn` and `subagent` refuse with why (the parent turn's tool result), and
the announcement is the sub-agent's answer as it gave it.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Sequence
from uuid import UUID

from django.contrib.auth.models import User

from agent import jobs, tool_patterns
from agent.events import Emit, SubagentCompleted, SubagentSpawned, discard
from agent.tools import ToolError
from agent.turn import ratelimit, spending, store
from agent.turn.outcome import RunRecorded
from sessions_app.models import Run, Session

logger = logging.getLogger(__name__)

SYSTEM_CHANNEL = "system"
# The most of a sub-agent's answer the announcing turn is given.
RESULT_CHARS = 8_000


class SessionAgents:
    """`ToolContext.agents` for a turn of `session`: sub-agents it starts report to it.
    `run_recorded` runs a sub-agent's turn that the tool waits for (the service's)."""

    def __init__(
        self,
        session: Session,
        owner: User | None,
        emit: Emit,
        *,
        model: str,
        run_recorded: RunRecorded,
        parent_run: UUID | None = None,
        tools: list[str] | None = None,
        approve_tools: Callable[[], Sequence[str]] | None = None,
    ) -> None:
        self.session = session
        # The run of the turn that starts them: each sub-agent's run links to it.
        self.parent_run = parent_run
        self.owner = owner
        self.emit = emit
        self.model = model
        self.run_recorded = run_recorded
        # A turn limited to some tools starts sub-agents that are limited to them too.
        self.tools = tools
        # What waits for a person in the starting turn beyond what every turn of the owner
        # gets (`approvals.carried_approvals`), the session's own when not given: read as
        # a sub-agent starts, since the turn knows it in full only once it has read the
        # skills it offers.
        self.approve_tools = approve_tools or (lambda: tool_patterns.parse(session.approve_tools))

    async def spawn(self, task: str, label: str) -> str:
        run = await self._queue(task, label)
        await store.enqueue(jobs.RUN_SUBAGENT, str(run.pk), task_name=f"subagent-{run.pk}")
        await self.emit(SubagentSpawned(id=str(run.pk), label=label))
        logger.info("%s spawned sub-agent %s (%s)", self.session.key, run.pk, label)
        return str(run.pk)

    async def run(self, task: str, label: str) -> str:
        run = await self._queue(task, label)
        await self.emit(SubagentSpawned(id=str(run.pk), label=label))
        status, text = await run_to_end(run, self.owner, self.run_recorded)
        await self.emit(SubagentCompleted(id=str(run.pk), label=label, status=status))
        if status != Run.Status.SUCCEEDED:
            raise ToolError(f"the sub-agent {status}: {text}")
        return text

    async def _queue(self, task: str, label: str) -> Run:
        """The sub-agent's run, queued once its turn is counted (`_count`)."""
        await self._count()
        return await store.queue_subagent(
            parent=self.session,
            task=task,
            label=label,
            model=self.model,
            parent_run_id=self.parent_run,
            tools=self.tools,
            approve_tools=self.approve_tools(),
            author_id=self.owner.pk if self.owner else None,
        )

    async def _count(self) -> None:
        """Count the sub-agent's turn against the owner's rate, or refuse to start it (past
        that rate or the owner's daily budget)."""
        if self.owner is None:
            return  # a turn of no account (the command line's): nobody's rate to count
        # What the starting turn has spent and holds counts already (`spending`).
        spent = await spending.past_budget(self.owner)
        if spent is not None:
            raise ToolError(f"no sub-agent was started: {spent}; do the task yourself")
        wait = await asyncio.to_thread(ratelimit.take_turn_slot, self.owner.pk)
        if wait is not None:
            raise ToolError(
                f"no sub-agent was started: {ratelimit.past_rate(self.owner.get_username())}; "
                f"try again in {math.ceil(wait)} s, or do the task yourself"
            )


async def run_to_end(run: Run, owner: User | None, run_recorded: RunRecorded) -> tuple[str, str]:
    """Run the queued sub-agent `run` to its end: its status and answer (or reason).

    The turn runs as a task of its own, so that a stop aimed at the sub-agent alone (its
    run's flag) ends that task and not the caller's; when the caller is cancelled, the
    sub-agent goes with it."""
    turn = asyncio.ensure_future(_turn(run, owner, run_recorded))
    try:
        return await asyncio.shield(turn)
    except asyncio.CancelledError:
        if turn.done():  # the sub-agent alone was stopped; its record says how it ended
            stopped = await store.get_run(run_id=run.pk)
            return Run.Status.CANCELLED, stopped.text if stopped and stopped.text else ""
        turn.cancel()
        await asyncio.wait([turn])
        raise


async def _turn(run: Run, owner: User | None, run_recorded: RunRecorded) -> tuple[str, str]:
    result = await run_recorded(run, owner=owner, emit=discard)
    return result.status, (result.text if result.success else result.error or result.text)
