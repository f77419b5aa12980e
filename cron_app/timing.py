"""When a cron job runs next: the rules of its three kinds, and their validation."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from croniter import CroniterBadDateError, croniter
from django.core.exceptions import ValidationError

EVERY = "every"
CRON = "cron"
AT = "at"

# A floor on intervals: each run is a turn that counts against its owner's turn rate.
MIN_EVERY_SECONDS = 30


def zone(name: str) -> ZoneInfo:
    """The IANA time zone `name`; a ValidationError names what went wrong."""
    if not name:
        raise ValidationError({"tz": "is empty; give an IANA time zone such as Europe/Paris"})
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        close = sorted(z for z in available_timezones() if z.lower().endswith(name.lower()))[:3]
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ValidationError(
            {"tz": f"unknown time zone {name!r}{hint}; use an IANA name such as Europe/Paris"}
        ) from None


# A job may wait this long for its next run at most (and no longer: datetime's range ends).
MAX_EVERY_SECONDS = 10 * 366 * 24 * 3600


def check_cron(expr: str) -> None:
    """Five fields (minute hour day month weekday), as crontab(5) writes them, that some
    date matches (`0 0 31 2 *` is well formed, but no February has a 31st)."""
    fields = expr.split()
    if len(fields) != 5 or not croniter.is_valid(expr):
        raise ValidationError(
            {
                "cron_expr": f"{expr!r} is not a cron expression of five fields "
                "(minute hour day-of-month month day-of-week), e.g. '0 9 * * 1-5'"
            }
        )
    try:
        croniter(expr, datetime(2000, 1, 1, tzinfo=ZoneInfo("UTC"))).get_next(datetime)
    except CroniterBadDateError:
        raise ValidationError({"cron_expr": f"{expr!r} matches no date"}) from None


def first_run(
    *,
    kind: str,
    every_seconds: int | None,
    cron_expr: str,
    tz: str,
    at: datetime | None,
    now: datetime,
) -> datetime | None:
    """The first time a job made (or changed) at `now` runs; None if it never will."""
    if kind == EVERY:
        return now + timedelta(seconds=every_seconds or 0)
    if kind == CRON:
        return croniter(cron_expr, now.astimezone(zone(tz))).get_next(datetime)
    return at if at is not None and at > now else None


def following(
    *,
    kind: str,
    every_seconds: int | None,
    cron_expr: str,
    tz: str,
    due: datetime,
    now: datetime,
) -> datetime | None:
    """The run after the one that was `due`, skipping any that passed while it waited (a
    worker that was down does not make up for lost time). None for a one-off job."""
    if kind == EVERY:
        step = timedelta(seconds=every_seconds or 0)
        missed = max(0, int((now - due) / step))
        return due + step * (missed + 1)
    if kind == CRON:
        return croniter(cron_expr, max(due, now).astimezone(zone(tz))).get_next(datetime)
    return None


def describe(
    *, kind: str, every_seconds: int | None, cron_expr: str, tz: str, at: datetime | None
) -> str:
    """The schedule in words, for lists the model and the admin read."""
    if kind == EVERY:
        return f"every {every_seconds} s"
    if kind == CRON:
        return f"cron '{cron_expr}' ({tz})"
    return f"once at {at.isoformat() if at else '?'}"
