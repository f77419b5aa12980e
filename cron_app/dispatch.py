"""Starting cron jobs on time: each worker cluster runs a dispatcher beside it.

django-q2's own scheduler looks for due schedules every 30 seconds, a cycle fixed in its
cluster, so a job it fired started 0 to 30 s late. The dispatcher instead reads the
earliest `next_run` among the enabled jobs at least once a second (one indexed query), sleeps
until it, takes the due run with a conditional UPDATE (`services.claim`) and hands it to
django-q2's workers as an ordinary task. Any number of clusters may dispatch from one
database: whichever claims a run queues it, the others find it taken.

A job that fell due while no worker ran starts once as soon as one does, and its next run
skips the ones missed (`timing.following`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import DatabaseError, connections
from django.utils import timezone

from agent import jobs
from cron_app import services
from cron_app.models import CronJob

logger = logging.getLogger(__name__)

# How often the dispatcher looks again at most, so that a job made, changed or enabled
# elsewhere is seen: a second, the start delay the contract allows for a job due at once.
POLL_SECONDS = 1.0
# The worker's sweep (a django-q2 schedule) starts a job overdue by this much: one no
# dispatcher took, the dispatchers being down or failing while their clusters work.
FALLBACK_AFTER = timedelta(seconds=10)
# Jobs read per look; more due at once are taken at the next, straight after.
BATCH = 200
TIMING_FIELDS = ("id", "kind", "every_seconds", "cron_expr", "tz", "next_run", "enabled")


def upcoming(*, until: datetime) -> list[CronJob]:
    """The enabled jobs due by `until`, earliest first."""
    jobs = CronJob.objects.filter(enabled=True, next_run__lte=until).only(*TIMING_FIELDS)
    return list(jobs.order_by("next_run")[:BATCH])


def start(job: CronJob, *, now: datetime, broker: Any = None) -> bool:
    """Claim the job's due run and queue it; whether this call started it (False when
    another dispatcher did, or the job changed since it was read)."""
    from django_q.tasks import async_task  # django-q2's client loads with the worker's needs

    taken = services.claim(job=job, now=now)
    if taken is None:
        return False
    options: dict[str, Any] = {"task_name": f"cron-{job.pk}"}
    if broker is not None:
        options["broker"] = broker
    try:
        async_task(jobs.RUN_CRON_JOB, job.pk, due=taken.due.isoformat(), q_options=options)
    except Exception:
        # The broker is down: the run goes back to being due, for the next look.
        services.unclaim(taken=taken)
        raise
    logger.info("started cron job %s due at %s", job.pk, taken.due.isoformat())
    return True


def start_due(*, overdue_by: timedelta = timedelta(0), broker: Any = None) -> int:
    """Start every job due `overdue_by` ago or earlier; how many this call started."""
    now = timezone.now()
    return start_each(upcoming(until=now - overdue_by), now=now, broker=broker)


def start_each(jobs: list[CronJob], *, now: datetime, broker: Any = None) -> int:
    """Start each of `jobs` that is still due; how many this call started. A job whose
    timing is broken is disabled by its claim; a run the broker refuses ends the pass."""
    started = 0
    for number, job in enumerate(jobs):
        try:
            started += start(job, now=now, broker=broker)
        except DatabaseError:
            raise
        except Exception:
            # The broker (Redis) down or refusing: the rest would fail alike, each with a
            # claim to give back. They stay due, for the next look.
            logger.exception(
                "could not queue cron job %s; %d more due wait for the next look",
                job.pk,
                len(jobs) - number - 1,
            )
            break
    return started


class Dispatcher:
    """The loop a cluster runs beside its workers (`manage.py qcluster`). `chores` are
    other looks that want doing about as often (at most once a poll), such as the calls that
    waited for a person past their time."""

    def __init__(
        self,
        *,
        poll: float = POLL_SECONDS,
        broker: Any = None,
        chores: Sequence[Callable[[], object]] = (),
    ) -> None:
        self.poll = poll
        self.broker = broker
        self.chores = tuple(chores)
        self.chores_due = 0.0

    def run(self, *, stopped: Callable[[], bool]) -> None:
        """Start jobs as they fall due until `stopped()` says so (looked at every poll)."""
        logger.info("cron dispatcher running (looks every %g s at most)", self.poll)
        while not stopped():
            wait = self.step()
            self.do_chores()
            time.sleep(wait)

    def do_chores(self) -> None:
        """Each chore, unless they were done less than a poll ago; one that fails is
        logged, and done again at the next."""
        now = time.monotonic()
        if now < self.chores_due:
            return
        self.chores_due = now + self.poll
        for chore in self.chores:
            try:
                chore()
            except DatabaseError:
                logger.exception("a dispatcher's chore could not reach the database")
                connections.close_all()
            except Exception:
                logger.exception("a dispatcher's chore failed; it runs again at the next look")

    def step(self) -> float:
        """Start what is due now; seconds to sleep before the next look."""
        try:
            now = timezone.now()
            jobs = upcoming(until=now + timedelta(seconds=self.poll))
            due = [job for job in jobs if job.next_run is not None and job.next_run <= now]
            later = jobs[len(due) :]
            started = start_each(due, now=now, broker=self.broker)
        except DatabaseError:
            # PostgreSQL restarting, say: a connection it dropped is opened afresh next time.
            logger.exception("the cron dispatcher could not read the jobs; it tries again")
            connections.close_all()
            return self.poll
        if len(jobs) == BATCH and not later and started:
            # More were due than one look takes. Not when none of them started (the broker
            # down, say): looking again at once would be a tight loop of reads.
            return 0.0
        if not later:
            return self.poll
        assert later[0].next_run is not None  # upcoming() reads only planned jobs
        wait = (later[0].next_run - timezone.now()).total_seconds()
        return min(max(wait, 0.0), self.poll)
