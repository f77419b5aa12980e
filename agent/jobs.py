"""Background jobs: the work the django-q2 worker runs, each named here by a constant.

The job functions live in `agent.job_functions`, a layer of their own: plain sync functions
that run the turn package's coroutines on an event loop of their own and return how it
went, for django-q2's record. The worker finds a job by the dotted path these constants
hold; code in any layer queues one by its constant (`enqueue(jobs.RUN_SUBAGENT, ...)` or
django-q2's `async_task(jobs.RUN_CRON_JOB, ...)`), never by a dotted string of its own and
never by importing the functions, which sit above the turn package and the data.

This module imports nothing of the project: the data apps (a cron job's "run now") use it
as well as the turn package.
"""

from __future__ import annotations

from typing import Any

FUNCTIONS = "agent.job_functions"

# A task the API queued (`POST /api/tasks` without `wait`): its turn.
RUN_QUEUED_TASK = f"{FUNCTIONS}.run_queued_task"
# A sub-agent that `spawn` queued, then the report of how it ended to its parent session.
RUN_SUBAGENT = f"{FUNCTIONS}.run_subagent"
# Only the report of how a sub-agent ended (one whose worker died, say).
ANNOUNCE_SUBAGENT = f"{FUNCTIONS}.announce_subagent"
# A cron job's run: claimed by a dispatcher when due, or "run now".
RUN_CRON_JOB = f"{FUNCTIONS}.run_cron_job"
# Scheduled: queues RUN_USER_HEARTBEAT for each user whose HEARTBEAT.md has open tasks.
RUN_HEARTBEAT = f"{FUNCTIONS}.run_heartbeat"
# One user's heartbeat.
RUN_USER_HEARTBEAT = f"{FUNCTIONS}.run_user_heartbeat"
# The oldest part of a long session summarised into memory.
CONSOLIDATE_MEMORY = f"{FUNCTIONS}.consolidate_memory"
# Scheduled: the sweep that fails the turns whose process died, and starts overdue cron jobs.
FAIL_DEAD_RUNS = f"{FUNCTIONS}.fail_dead_runs"
# A turn that waited for a person, going on once its calls are answered (or their time is up).
RESUME_RUN = f"{FUNCTIONS}.resume_run"

ALL = (
    RUN_QUEUED_TASK,
    RUN_SUBAGENT,
    ANNOUNCE_SUBAGENT,
    RUN_CRON_JOB,
    RUN_HEARTBEAT,
    RUN_USER_HEARTBEAT,
    CONSOLIDATE_MEMORY,
    FAIL_DEAD_RUNS,
    RESUME_RUN,
)


def enqueue(job: str, *args: Any, task_name: str, **kwargs: Any) -> None:
    """Hand `job` (one of the constants above) to the worker once the caller's transaction
    commits (at once outside one): before, the worker could look for rows it cannot see
    yet."""
    from django.db import transaction
    from django_q.tasks import async_task  # the queue's client loads with its first job

    transaction.on_commit(lambda: async_task(job, *args, task_name=task_name, **kwargs))
