"""The job functions the django-q2 worker runs, each named by a constant of `agent.jobs`:
plain sync functions that run the turn package's coroutines.

Each runs its coroutine on an event loop that closes when it returns, so through
`delivering`: the events it published reach the sockets first."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import transaction

from agent import jobs, turn
from agent.conf import agent_settings
from agent.turn import delivering
from cron_app import dispatch
from cron_app.services import drop_schedule, ensure_schedule
from sessions_app import runs as run_records
from sessions_app import selectors
from sessions_app.models import Run

logger = logging.getLogger(__name__)


def run_queued_task(run_id: str) -> str:
    """Run a task the API queued. Returns its final status for django-q's own record."""
    run = selectors.get_run(run_id=UUID(run_id))
    if run is None:
        logger.warning("queued task %s no longer exists", run_id)
        return "missing"
    if run.status != Run.Status.QUEUED:
        return run.status  # cancelled before a worker got to it
    turn.execute_task(run, owner=run.author if run.author_id else run.session.owner)
    finished = selectors.get_run(run_id=run.pk)
    return finished.status if finished is not None else "missing"


def run_subagent(run_id: str) -> str:
    """Run a sub-agent that `spawn` queued, then announce how it ended to its parent."""
    work = delivering(turn.run_spawned_subagent, what=f"sub-agent run {run_id}")
    return async_to_sync(work)(UUID(run_id))


def announce_subagent(run_id: str) -> None:
    """Tell a sub-agent's parent session how it ended (one whose worker died, say)."""
    work = delivering(turn.announce_subagent, what=f"the end of sub-agent run {run_id}")
    async_to_sync(work)(UUID(run_id))


def run_cron_job(job_id: int, scheduled: bool = True, due: str | None = None) -> str:
    """Run a cron job: due at `due` (ISO 8601) and claimed by a dispatcher, or by "run
    now" (`scheduled` False)."""
    when = datetime.fromisoformat(due) if due else None
    work = delivering(turn.run_cron_job, what=f"cron job {job_id}")
    return async_to_sync(work)(job_id, scheduled=scheduled, due=when)


def run_heartbeat() -> str:
    """Scheduled (`ensure_schedules`): a beat of its own for each user whose HEARTBEAT.md
    asks for something, side by side on the workers. Nothing once the heartbeat is off
    (`AGENT_HEARTBEAT_INTERVAL=0`), even if its schedule is still there or it was queued."""
    from django_q.tasks import async_task

    if agent_settings().heartbeat_interval <= 0:
        return "off"
    users = turn.heartbeat_users(agent_settings())
    for user in users:
        async_task(jobs.RUN_USER_HEARTBEAT, user.pk, task_name=f"heartbeat-{user.pk}")
    return f"{len(users)} heartbeat(s) queued" if users else "idle"


def run_user_heartbeat(user_id: int) -> str:
    """One user's heartbeat (queued by `run_heartbeat`)."""
    from django.contrib.auth import get_user_model

    if agent_settings().heartbeat_interval <= 0:
        return "off"
    user = get_user_model().objects.filter(pk=user_id, is_active=True).first()
    if user is None:
        return "missing"
    work = delivering(turn.user_heartbeat, what=f"the heartbeat of user {user_id}")
    return async_to_sync(work)(agent_settings(), user)


def resume_run(run_id: str) -> str:
    """Go on with a turn that waited for a person: its calls are answered, or their time is
    up (`settle_approvals`), and no door resumed it."""
    return turn.resume_task(UUID(run_id))


def settle_approvals() -> int:
    """The calls that waited for a person past AGENT_APPROVAL_TIMEOUT count as declined,
    and each waiting turn that may go on and that no door resumed is queued to go on; how
    many were. Each cluster's dispatcher does this every second, the sweep too."""
    ready = async_to_sync(delivering(turn.settle_approvals, what="the settled approvals"))()
    for run_id in ready:
        jobs.enqueue(jobs.RESUME_RUN, str(run_id), task_name=f"resume-{run_id}")
    return len(ready)


def consolidate_memory(session_id: int, model: str) -> bool:
    """Summarise the oldest part of a long session into memory."""
    return async_to_sync(turn.consolidate_session)(session_id, model=model, conf=agent_settings())


SWEEP_SCHEDULE = "Fail dead runs"
HEARTBEAT_SCHEDULE = "Heartbeat"


def ensure_schedules(**kwargs: Any) -> None:
    """The worker's periodic jobs as the settings say: after every `migrate` (`post_migrate`)
    and as every worker starts (`manage.py qcluster`), even if someone deleted or changed one
    in the admin since. A heartbeat interval of 0 deletes its schedule. In one transaction:
    no one (the scheduler, the admin) sees a schedule half changed, its new interval with
    its old next run."""
    with transaction.atomic():
        # Every 20 seconds; the worker looks at its schedules every 30.
        ensure_schedule(name=SWEEP_SCHEDULE, func=jobs.FAIL_DEAD_RUNS, cron="* * * * * */20")
        interval = agent_settings().heartbeat_interval
        if interval > 0:
            minutes = max(1, round(interval / 60))  # django-q2 counts intervals in minutes
            ensure_schedule(name=HEARTBEAT_SCHEDULE, func=jobs.RUN_HEARTBEAT, minutes=minutes)
            _no_later_than(HEARTBEAT_SCHEDULE, timedelta(minutes=minutes))
        else:
            drop_schedule(name=HEARTBEAT_SCHEDULE)


def _no_later_than(name: str, interval: timedelta) -> None:
    """A shorter interval counts from now: the run planned on the longer one may be far off."""
    from django.utils import timezone
    from django_q.models import Schedule

    soonest = timezone.now() + interval
    Schedule.objects.filter(name=name, next_run__gt=soonest).update(next_run=soonest)


def fail_dead_runs() -> int:
    """Scheduled (`ensure_schedules`): mark failed the turns whose process died, whichever
    door started them, and tell the sessions that started such sub-agents and the chats
    such cron runs report to. Open chats show it (`ChatConsumer._follow`). Also starts any
    cron job long overdue, which only happens when no cluster's dispatcher is running."""
    # django-q2 gives a task this long before it would hand it out again (with the ORM
    # broker; Redis never does): a run still queued after that has lost its task.
    dead = run_records.fail_dead_runs(
        unstarted_after=timedelta(seconds=settings.Q_CLUSTER["retry"])
    )
    if dead:
        logger.warning(
            "marked %d turn(s) failed: their process died, or none started them", len(dead)
        )
    from django_q.tasks import async_task

    for run_id in selectors.subagents_among(run_ids=dead):
        async_task(jobs.ANNOUNCE_SUBAGENT, str(run_id), task_name=f"announce-{run_id}")
    if dead:
        report = delivering(turn.report_dead_cron_runs, what="the report of dead runs")
        async_to_sync(report)(dead)
    turn.prune_relayed()
    settle_approvals()
    late = dispatch.start_due(overdue_by=dispatch.FALLBACK_AFTER)
    if late:
        logger.warning("started %d overdue cron job(s) that no dispatcher had started", late)
    return len(dead)
