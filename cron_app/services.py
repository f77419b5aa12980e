"""Writes to cron jobs, to the worker's own schedules (django-q2's `Schedule` rows), and the
claim that starts a due job exactly once."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from agent import jobs
from agent.conf import agent_settings
from cron_app.models import SCHEDULE_FIELDS, CronJob

logger = logging.getLogger(__name__)


def ensure_schedule(
    *, name: str, func: str, cron: str | None = None, minutes: int | None = None
) -> None:
    """The schedule `name` exists, calls `func` (a dotted path) and repeats on `cron` (with
    a seconds field) or every so many `minutes`: made if missing, put back if someone
    changed it in the admin."""
    from django_q.models import Schedule  # django-q2's models load with the worker's needs

    if cron is not None:
        timing = {"schedule_type": Schedule.CRON, "cron": cron, "minutes": None}
    else:
        timing = {"schedule_type": Schedule.MINUTES, "minutes": minutes, "cron": None}
    Schedule.objects.update_or_create(name=name, defaults={"func": func, "repeats": -1, **timing})


def drop_schedule(*, name: str) -> None:
    from django_q.models import Schedule

    Schedule.objects.filter(name=name).delete()


@transaction.atomic
def create_job(*, owner: User | None = None, owner_id: int | None = None, **fields: Any) -> CronJob:
    """A new job, validated (`ValidationError` names the field, the owner too: a job needs
    one) and planned."""
    # Either given, or neither: then `full_clean` refuses the job for want of an owner.
    whose: dict[str, Any] = {"owner": owner} if owner is not None else {"owner_id": owner_id}
    job = CronJob(**whose, **fields)
    if not job.name:
        job.name = job.message[:60].strip() or "cron job"
    job.full_clean()
    make_room(owner_id=job.owner_id)
    job.plan(timezone.now())
    job.save()
    return job


@transaction.atomic
def make_room(*, owner_id: int, moving: int | None = None) -> None:
    """Refuse (`ValidationError`) one job more for the user once they have
    `AGENT_CRON_MAX_JOBS`: each job's runs are turns of theirs. `moving`: a job of someone
    else's being given to them. Call it inside the transaction that saves the job: the
    user's row is locked first (PostgreSQL; SQLite writes one transaction at a time), so
    that of two jobs made at once the second counts the first."""
    limit = agent_settings().cron_max_jobs
    users = get_user_model().objects.select_for_update().filter(pk=owner_id)
    name = users.values_list(get_user_model().USERNAME_FIELD, flat=True).first()
    jobs = CronJob.objects.filter(owner_id=owner_id)
    if moving is not None:
        jobs = jobs.exclude(pk=moving)
    held = jobs.count()
    if held < limit:
        return
    if limit <= 0:
        raise ValidationError(
            f"cron jobs are turned off on this site (AGENT_CRON_MAX_JOBS is {limit})",
            code="max_jobs",
        )
    over = held - limit + 1
    raise ValidationError(
        f"{name or 'this user'} has {held} cron jobs, and one user may have at most {limit} "
        f"(AGENT_CRON_MAX_JOBS): remove {'one' if over == 1 else over} before adding another",
        code="max_jobs",
    )


@transaction.atomic
def update_job(*, job: CronJob, **fields: Any) -> CronJob:
    """Change the job; a change of its timing plans it afresh (the same values sent back
    leave its next run where it was)."""
    changed = {name for name, value in fields.items() if getattr(job, name) != value}
    for name, value in fields.items():
        setattr(job, name, value)
    job.full_clean()
    if SCHEDULE_FIELDS & changed:
        job.plan(timezone.now())
    job.save()
    return job


def set_enabled(*, job: CronJob, enabled: bool) -> CronJob:
    if job.enabled == enabled:
        return job
    return update_job(job=job, enabled=enabled)


def delete_job(*, job: CronJob) -> None:
    job.delete()


@dataclass(frozen=True)
class Claim:
    """A run of job `job_id` that was due at `due`, taken; the job now runs next at
    `following` (None: not again) and is `enabled` or not."""

    job_id: int
    due: datetime
    following: datetime | None
    enabled: bool


def claim(*, job: CronJob, now: datetime) -> Claim | None:
    """Take the run of `job` due at its `next_run` (as read) and plan the one after, in one
    conditional UPDATE: of any number of dispatchers that try at once, one gets the claim,
    the others None, as does a job changed or taken since it was read. A one-off job is
    disabled (kept, with its last run, for the record), and so is a job whose next run
    cannot be computed (`give_up`)."""
    if job.next_run is None:
        return None
    try:
        following = job.following(due=job.next_run, now=now)
    except Exception as exc:  # the job's own fields: no later look would do better
        give_up(job=job, reason=exc, now=now)
        return None
    taken = Claim(
        job_id=job.pk,
        due=job.next_run,
        following=following,
        enabled=job.kind != CronJob.Kind.AT,
    )
    updated = CronJob.objects.filter(pk=job.pk, enabled=True, next_run=taken.due).update(
        next_run=taken.following, enabled=taken.enabled, updated=now
    )
    return taken if updated else None


def give_up(*, job: CronJob, reason: Exception, now: datetime) -> bool:
    """Disable `job`, whose run due at its `next_run` (as read) cannot be planned past, with
    why on its record; unless the job changed since (it was fixed, say). Whether it did: of
    dispatchers that try at once, one logs it."""
    messages = reason.messages if isinstance(reason, ValidationError) else [str(reason)]
    why = "; ".join(message for message in messages if message) or type(reason).__name__
    error = f"disabled: its next run could not be computed ({why})"
    updated = CronJob.objects.filter(pk=job.pk, enabled=True, next_run=job.next_run).update(
        enabled=False,
        next_run=None,
        last_status=CronJob.Status.FAILED,
        last_error=error[:2000],
        updated=now,
    )
    if updated:
        logger.error("cron job %s is %s", job.pk, error, exc_info=reason)
    return bool(updated)


def unclaim(*, taken: Claim) -> None:
    """Give back a claim whose run could not be queued, unless the job changed since: it
    is then due again, and the next look takes it."""
    CronJob.objects.filter(pk=taken.job_id, next_run=taken.following, enabled=taken.enabled).update(
        next_run=taken.due, enabled=True, updated=timezone.now()
    )


def record_run(*, job_id: int, status: str, error: str = "", when: datetime) -> None:
    CronJob.objects.filter(pk=job_id).update(
        last_run=when, last_status=status, last_error=error[:2000]
    )


def run_now(*, job: CronJob) -> None:
    """Queue a run of the job outside its schedule; the schedule stays as it is."""
    jobs.enqueue(jobs.RUN_CRON_JOB, job.pk, scheduled=False, task_name=f"cron-{job.pk}-now")
