"""The jobs of a turn's owner, as the agent's `cron` tool adds, lists and changes them
(`ToolContext.schedules`). A job added here reports to the turn's session and carries the
turn's limits: the tools it was limited to, and what waited for a person in it
(`approvals.carried_approvals`), which its runs, with no one to ask, refuse. When it runs
is `cron_runs`' business."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from django.core.exceptions import ValidationError
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from agent.tools import JobInfo, ToolError
from agent.turn import store
from cron_app.models import CronJob


class OwnerSchedules:
    """`ToolContext.schedules`: the jobs of the turn's owner; new ones report to the turn's
    session. `tools`: the tools the turn may use (None: every one); `approve_tools`: what
    waits for a person in it beyond what every turn of its owner gets, read as a job is
    added."""

    def __init__(
        self,
        *,
        owner_id: int | None,
        session_key: str,
        tools: list[str] | None = None,
        approve_tools: Callable[[], Sequence[str]] = tuple,
    ) -> None:
        self.owner_id = owner_id
        self.session_key = session_key
        self.tools = tools
        self.approve_tools = approve_tools

    async def add(
        self,
        *,
        message: str,
        every_seconds: int | None,
        cron_expr: str | None,
        tz: str | None,
        at: str | None,
    ) -> JobInfo:
        fields: dict[str, Any] = {
            "message": message,
            "session": self.session_key,
            "tools": self.tools,
            "approve_tools": list(self.approve_tools()),
        }
        if every_seconds:
            fields.update(kind=CronJob.Kind.EVERY, every_seconds=every_seconds)
        elif cron_expr:
            fields.update(kind=CronJob.Kind.CRON, cron_expr=cron_expr.strip(), tz=tz or "UTC")
        else:
            fields.update(kind=CronJob.Kind.AT, at=_moment(at or "", tz), tz=tz or "UTC")
        try:
            job = await store.create_job(owner_id=self.owner_id, **fields)
        except ValidationError as exc:
            raise ToolError(_reason(exc)) from None
        return _info(job)

    async def list(self) -> list[JobInfo]:
        return [_info(job) for job in await store.jobs_of(owner_id=self.owner_id)]

    async def remove(self, job_id: int) -> JobInfo:
        job = await self._find(job_id)
        await store.delete_job(job=job)
        return _info(job)

    async def set_enabled(self, job_id: int, enabled: bool) -> JobInfo:
        job = await self._find(job_id)
        job = await store.set_job_enabled(job=job, enabled=enabled)
        return _info(job)

    async def _find(self, job_id: int) -> CronJob:
        job = await store.find_job(job_id=job_id, owner=self.owner_id)
        if job is None:
            raise ToolError(f"there is no job {job_id} (the list action shows them)")
        return job


def _moment(text: str, tz: str | None) -> datetime:
    """An ISO 8601 time; one without an offset is read in `tz`, else in UTC."""
    try:
        moment = parse_datetime(text.strip())
    except ValueError:
        moment = None
    if moment is None:
        raise ToolError(f"at: {text!r} is not an ISO 8601 time such as 2026-12-24T18:00:00+01:00")
    if moment.tzinfo is None:
        try:
            zone = ZoneInfo(tz or "UTC")
        except Exception:
            raise ToolError(
                f"tz: unknown time zone {tz!r}; use an IANA name such as Europe/Paris"
            ) from None
        moment = moment.replace(tzinfo=zone)
    if moment <= timezone.now():
        raise ToolError(f"at: {text} is in the past (now is {timezone.now():%Y-%m-%dT%H:%M:%SZ})")
    return moment


def _reason(error: ValidationError) -> str:
    if hasattr(error, "message_dict"):
        return "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in error.message_dict.items())
    return " ".join(error.messages)


def _info(job: CronJob) -> JobInfo:
    return JobInfo(
        id=job.pk,
        name=job.name,
        message=job.message,
        schedule=job.describe(),
        session=job.session,
        enabled=job.enabled,
        next_run=job.next_run.isoformat(timespec="seconds") if job.next_run else None,
        last_status=job.last_status,
    )
