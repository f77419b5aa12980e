"""Writes to cron jobs and to the worker's schedules (django-q2's `Schedule` rows)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from cron_app.models import SCHEDULE_FIELDS, CronJob
from cron_app.schedules import RUN_TASK


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
    """A new job, validated (`ValidationError` names the field) and scheduled."""
    job = (
        CronJob(owner=owner, **fields)
        if owner is not None
        else CronJob(owner_id=owner_id, **fields)
    )
    if not job.name:
        job.name = job.message[:60].strip() or "cron job"
    job.full_clean(exclude=["owner"])
    job.plan(timezone.now())
    job.save()
    return job


@transaction.atomic
def update_job(*, job: CronJob, **fields: Any) -> CronJob:
    """Change the job; a change of its timing plans it afresh (the same values sent back
    leave its next run where it was)."""
    changed = {name for name, value in fields.items() if getattr(job, name) != value}
    for name, value in fields.items():
        setattr(job, name, value)
    job.full_clean(exclude=["owner"])
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


def rearm(*, job_id: int, due: datetime | None) -> CronJob | None:
    """Plan the run after the one due at `due`, which has just fired; a one-off job is
    disabled (kept, with its last run, for the record). None if the job is gone."""
    with transaction.atomic():
        job = CronJob.objects.select_for_update().filter(pk=job_id).first()
        if job is None:
            return None
        now = timezone.now()
        if job.kind == CronJob.Kind.AT:
            job.enabled = False
        job.plan_after(due or now, now)
        job.save(update_fields=["enabled", "next_run", "updated"])
        return job


def record_run(*, job_id: int, status: str, error: str = "", when: datetime) -> None:
    CronJob.objects.filter(pk=job_id).update(
        last_run=when, last_status=status, last_error=error[:2000]
    )


def run_now(*, job: CronJob) -> None:
    """Queue a run of the job outside its schedule; the schedule stays as it is."""
    from django_q.tasks import async_task

    job_id = job.pk
    transaction.on_commit(
        lambda: async_task(RUN_TASK, job_id, scheduled=False, task_name=f"cron-{job_id}-now")
    )
