"""Writes to the worker's schedules (django-q2's `Schedule` rows)."""

from __future__ import annotations


def ensure_schedule(*, name: str, func: str, cron: str) -> None:
    """The schedule `name` exists, calls `func` (a dotted path) and repeats on `cron` (with
    a seconds field): made if missing, put back if someone changed it in the admin."""
    from django_q.models import Schedule  # django-q2's models load with the worker's needs

    Schedule.objects.update_or_create(
        name=name,
        defaults={"func": func, "schedule_type": Schedule.CRON, "cron": cron, "repeats": -1},
    )
