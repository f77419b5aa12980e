"""The names django-q2 knew the jobs by before they moved to `agent.job_functions`: tasks
queued, and schedules made, under those names still find their function here. Code names a
job by its constant in `agent.jobs`; nothing new is named after this module."""

from __future__ import annotations

from agent.job_functions import (
    announce_subagent,
    consolidate_memory,
    fail_dead_runs,
    run_cron_job,
    run_heartbeat,
    run_queued_task,
    run_subagent,
    run_user_heartbeat,
)

__all__ = [
    "announce_subagent",
    "consolidate_memory",
    "fail_dead_runs",
    "run_cron_job",
    "run_heartbeat",
    "run_queued_task",
    "run_subagent",
    "run_user_heartbeat",
]
