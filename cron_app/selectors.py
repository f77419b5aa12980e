"""Reads of cron jobs."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from cron_app.models import CronJob


def jobs_of(*, owner: Any) -> QuerySet[CronJob]:
    """The jobs of `owner` (a user, or None for the ownerless ones)."""
    if owner is None:
        return CronJob.objects.filter(owner__isnull=True)
    return CronJob.objects.filter(owner=owner)


def find_job(*, job_id: int, owner: Any) -> CronJob | None:
    return jobs_of(owner=owner).filter(pk=job_id).first()


def get_job(*, job_id: int) -> CronJob | None:
    return CronJob.objects.select_related("owner").filter(pk=job_id).first()
