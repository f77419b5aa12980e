"""Tools that start work beyond the turn: sub-agents (`spawn`, `subagent`) and scheduled
jobs (`cron`). What they start is the turn service's business; they reach it through the
turn's context (`ToolContext.agents`, `ToolContext.schedules`)."""

from __future__ import annotations

import logging
from typing import Any

from agent.tools.base import Agents, JobInfo, Tool, ToolContext, ToolError

logger = logging.getLogger(__name__)

LABEL_CHARS = 60
# What `spawn` and `subagent` take: a sub-agent knows only what its task says.
TASK_PARAMETERS = {
    "type": "object",
    "properties": {
        "task": {
            "type": "string",
            "minLength": 1,
            "description": "What the sub-agent must do, with all the context it needs.",
        },
        "label": {"type": "string", "description": "A short name for it, shown to the user."},
    },
    "required": ["task"],
}


def _label(task: str, label: str | None) -> str:
    text = (label or "").strip() or " ".join(task.split())
    return text[:LABEL_CHARS].rstrip() + ("…" if len(text) > LABEL_CHARS else "")


def _agents(ctx: ToolContext) -> Agents:
    if ctx.agents is None:
        raise ToolError("sub-agents cannot be started from here")
    return ctx.agents


class SpawnTool(Tool):
    name = "spawn"
    description = (
        "Start a sub-agent in the background for a task that takes a while or can run on "
        "its own (research, a long build, a batch of files). It answers at once with an id; "
        "the sub-agent works with the same tools but no conversation history, so put "
        "everything it needs into `task`. When it finishes, its result is reported to this "
        "conversation."
    )
    parameters = TASK_PARAMETERS

    async def execute(self, ctx: ToolContext, /, **kwargs: Any) -> str:
        task: str = kwargs["task"]
        name = _label(task, kwargs.get("label"))
        agent_id = await _agents(ctx).spawn(task, name)
        return (
            f"Sub-agent '{name}' started (id {agent_id}). Its result will be reported to this "
            "conversation when it finishes; you need not wait for it."
        )


class SubagentTool(Tool):
    name = "subagent"
    time_limit = None  # a whole agent: its model calls and iteration cap bound it
    description = (
        "Run a sub-agent on a self-contained task and wait for its answer. It has the same "
        "tools but no conversation history, so put everything it needs into `task`. Use "
        "`spawn` instead when the task may take long."
    )
    parameters = TASK_PARAMETERS

    async def execute(self, ctx: ToolContext, /, **kwargs: Any) -> str:
        task: str = kwargs["task"]
        return await _agents(ctx).run(task, _label(task, kwargs.get("label")))


class CronTool(Tool):
    name = "cron"
    description = (
        "Schedule messages to yourself. add: run `message` as a task on a schedule (give "
        "exactly one of every_seconds, cron_expr with an optional IANA tz, or at as an ISO "
        "8601 time) and report the answer in this conversation; list: the scheduled jobs; "
        "remove / enable / disable: by job_id."
    )
    parameters = {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["add", "list", "remove", "enable", "disable"]},
            "message": {"type": "string", "description": "add: what to do each time it runs."},
            "every_seconds": {
                "type": "integer",
                "minimum": 1,
                "description": "add: run every N seconds.",
            },
            "cron_expr": {
                "type": "string",
                "description": "add: five-field cron expression, e.g. '0 9 * * 1-5'.",
            },
            "tz": {
                "type": "string",
                "description": "add: IANA time zone of cron_expr (default UTC).",
            },
            "at": {"type": "string", "description": "add: run once at this ISO 8601 time."},
            "job_id": {"type": "integer", "description": "remove / enable / disable: which job."},
        },
        "required": ["action"],
    }

    async def execute(self, ctx: ToolContext, /, **args: Any) -> str:
        action: str = args.pop("action")
        if ctx.schedules is None:
            raise ToolError("jobs cannot be scheduled from here (a scheduled run or a sub-agent)")
        if action == "add":
            return await self._add(ctx, **args)
        if action == "list":
            jobs = await ctx.schedules.list()
            if not jobs:
                return "No scheduled jobs."
            return "\n".join(_line(job) for job in jobs)
        job_id = args.get("job_id")
        if job_id is None:
            raise ToolError(f"{action} needs job_id (see the list action)")
        if action == "remove":
            job = await ctx.schedules.remove(job_id)
            return f"Removed job {job.id} ({job.name})."
        job = await ctx.schedules.set_enabled(job_id, action == "enable")
        return f"Job {job.id} is now {action}d. {_line(job)}"

    async def _add(
        self,
        ctx: ToolContext,
        *,
        message: str | None = None,
        every_seconds: int | None = None,
        cron_expr: str | None = None,
        tz: str | None = None,
        at: str | None = None,
        **_: Any,
    ) -> str:
        assert ctx.schedules is not None
        if not (message or "").strip():
            raise ToolError("add needs message: what to do each time the job runs")
        given = [
            name
            for name, value in (
                ("every_seconds", every_seconds),
                ("cron_expr", cron_expr),
                ("at", at),
            )
            if value
        ]
        if len(given) != 1:
            raise ToolError(
                "add needs exactly one of every_seconds, cron_expr or at"
                + (f" (got {', '.join(given)})" if given else "")
            )
        job = await ctx.schedules.add(
            message=message or "", every_seconds=every_seconds, cron_expr=cron_expr, tz=tz, at=at
        )
        return f"Scheduled job {job.id}: {job.schedule}, next run {job.next_run or 'never'}."


def _line(job: JobInfo) -> str:
    state = "enabled" if job.enabled else "disabled"
    last = f", last run {job.last_status}" if job.last_status else ""
    return (
        f"#{job.id} {job.name!r}: {job.schedule}, {state}, next run {job.next_run or '-'}"
        f"{last}; reports to {job.session}"
    )
