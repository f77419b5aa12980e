"""Sub-agents that `spawn` queued, as the worker runs them: the sub-agent's turn, then how it
ended told to the session that started it (`announce_subagent`), a frame for its sockets and, unless
it was stopped, a short turn on the `system` channel in which the agent tells the user what
came of it. That turn counts against the owner's turn rate; past it, or past the owner's
daily budget, the sub-agent's answer is posted as it gave it. It keeps to the tools the
sub-agent was limited to (the turn's that started it), and what waited for a person there
waits in it too: it runs in that turn's chat, where a person can be asked.
"""

from __future__ import annotations

import asyncio
import logging
from uuid import UUID

from agent import context
from agent.events import SubagentCompleted
from agent.turn import fanout, ratelimit, spending, store
from agent.turn.delivery import post
from agent.turn.fanout import GroupSink
from agent.turn.service import run_recorded
from agent.turn.subagents import RESULT_CHARS, SYSTEM_CHANNEL, run_to_end
from sessions_app.models import Run
from sessions_app.services import SessionDeleted

logger = logging.getLogger(__name__)


async def run_spawned_subagent(run_id: UUID) -> str:
    """The worker's side of `spawn`: run the sub-agent, then announce how it ended."""
    run = await store.subagent_run(run_id=run_id)
    if run is None:
        logger.warning("sub-agent %s no longer exists", run_id)
        return "missing"
    if run.status == Run.Status.QUEUED:
        await run_to_end(run, await store.author_of(run_id=run.pk), run_recorded)
    await announce_subagent(run_id)
    finished = await store.get_run(run_id=run_id)
    return finished.status if finished is not None else "missing"


async def announce_subagent(run_id: UUID) -> None:
    """Tell the session that started sub-agent `run_id` how it ended: a frame for its
    sockets and, unless it was stopped, a short turn in which the agent reports to the user."""
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
    # The sub-agent's author's: in a team chat, the member whose turn started it.
    owner = await store.author_of(run_id=run.pk)
    why = await spending.past_budget(owner)
    if (
        why is None
        and owner is not None
        and await asyncio.to_thread(ratelimit.take_turn_slot, owner.pk) is not None
    ):
        why = ratelimit.past_rate(owner.get_username())
    if why is not None:
        # The agent's own words would take a turn past the owner's rate or budget: the
        # answer as it is.
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
        # Recorded first with what the sub-agent carried, as every turn the agent starts
        # on its own is: the turn keeps to it wherever it runs, and goes on after a wait.
        told = await store.queue_run(
            session=parent,
            channel=SYSTEM_CHANNEL,
            prompt=content,
            model="",
            tools=run.tools,
            approve_tools=run.approve_tools,
            author_id=owner.pk if owner else None,
        )
    except SessionDeleted:
        logger.info("could not announce sub-agent %s: %s was deleted", run_id, parent.key)
        return
    # A turn that cannot start (the parent deleted meanwhile, no model any more) ends
    # failed on its record, with why.
    await run_recorded(told, owner=owner, emit=GroupSink(parent.pk))
