"""django-q2 task functions: plain sync functions that run the async turn."""

from __future__ import annotations

import logging
from typing import Any
from uuid import UUID

from asgiref.sync import async_to_sync

from agent.conf import agent_settings
from agent.turn import memory
from agent.turn.runs import execute
from cron_app.services import ensure_schedule
from sessions_app import selectors, services
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
    execute(run, owner=run.session.owner)
    finished = selectors.get_run(run_id=run.pk)
    return finished.status if finished is not None else "missing"


def consolidate_memory(session_id: int, model: str) -> bool:
    """Summarise the oldest part of a long session into memory (`agent.turn.memory`)."""
    return async_to_sync(memory.consolidate)(session_id, model=model, conf=agent_settings())


SWEEP_SCHEDULE = "Fail dead runs"


def ensure_schedules(**kwargs: Any) -> None:
    """`post_migrate`: the worker's periodic jobs exist, as every `migrate` leaves them,
    even if someone deleted one in the admin since."""
    # Every 20 seconds; the worker looks at its schedules every 30.
    ensure_schedule(name=SWEEP_SCHEDULE, func=f"{__name__}.fail_dead_runs", cron="* * * * * */20")


def fail_dead_runs() -> int:
    """Scheduled (`ensure_schedules`): mark failed the turns whose process died, whichever
    door started them. Open chats show it (`ChatConsumer._follow`)."""
    count = services.fail_dead_runs()
    if count:
        logger.warning("marked %d turn(s) failed: the process running them died", count)
    return count
