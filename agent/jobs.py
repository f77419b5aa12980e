"""django-q2 task functions: plain sync functions that run the async turn."""

from __future__ import annotations

import logging
from typing import Any

from agent.tasks import execute
from sessions_app import services
from sessions_app.models import Run

logger = logging.getLogger(__name__)


def run_queued_task(run_id: str) -> str:
    """Run a task the API queued. Returns its final status for django-q's own record."""
    run = Run.objects.select_related("session", "session__owner").filter(pk=run_id).first()
    if run is None:
        logger.warning("queued task %s no longer exists", run_id)
        return "missing"
    if run.status != Run.Status.QUEUED:
        return run.status  # cancelled before a worker got to it
    execute(run, owner=run.session.owner, model=run.model or None)
    run.refresh_from_db()
    return run.status


SWEEP_SCHEDULE = "Fail dead runs"


def ensure_schedules(**kwargs: Any) -> None:
    """`post_migrate`: the worker's periodic jobs exist, as every `migrate` leaves them,
    even if someone deleted one in the admin since."""
    from django_q.models import Schedule

    Schedule.objects.update_or_create(
        name=SWEEP_SCHEDULE,
        defaults={
            "func": f"{__name__}.fail_dead_runs",
            # Every 20 seconds; the worker looks at its schedules every 30.
            "schedule_type": Schedule.CRON,
            "cron": "* * * * * */20",
            "repeats": -1,
        },
    )


def fail_dead_runs() -> int:
    """Scheduled (`ensure_schedules`): mark failed the turns whose process died, whichever
    door started them. Open chats show it (`ChatConsumer._follow`)."""
    count = services.fail_dead_runs()
    if count:
        logger.warning("marked %d turn(s) failed: the process running them died", count)
    return count
