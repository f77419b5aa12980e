"""Cron jobs: a message the agent is given on a schedule, and where its answer goes."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

from agent import tool_patterns

# `validate_tool_patterns` is named here too: the migrations refer to it by this path.
from agent.tool_fields import tool_patterns_field, validate_tool_patterns  # noqa: F401
from cron_app import timing

OWNER_NEEDED = "a cron job needs an owner: its runs are that user's turns"
# A tool's name as a run's limit names it (`Run.tools`): no globs.
TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,200}$")


def validate_tools(value: Any) -> None:
    """None (every tool), or a list of tool names."""
    if value is None:
        return
    if not isinstance(value, list) or len(value) > tool_patterns.MAX_PATTERNS:
        raise ValidationError(
            f"give null for every tool, or a list of at most {tool_patterns.MAX_PATTERNS} "
            'tool names such as ["read_file", "web_search"]'
        )
    wrong = [item for item in value if not isinstance(item, str) or not TOOL_NAME.match(item)]
    if wrong:
        raise ValidationError([f"{item!r} is not a tool name" for item in wrong])


class CronJob(models.Model):
    """Runs `message` as a turn of session `cron:<id>` and delivers the answer to `session`
    (a key in the owner's key space). Each worker's dispatcher (`cron_app.dispatch`) starts
    an enabled job at `next_run`."""

    class Kind(models.TextChoices):
        EVERY = timing.EVERY, "every N seconds"
        CRON = timing.CRON, "cron expression"
        AT = timing.AT, "once, at a time"

    class Status(models.TextChoices):
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"
        SKIPPED = "skipped"

    # Required: a job's turns run as its owner, in the owner's sessions; without one its
    # answers would land in sessions no one can open.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="cron_jobs",
        error_messages={"null": OWNER_NEEDED, "blank": OWNER_NEEDED},
    )
    name = models.CharField(max_length=200)
    message = models.TextField(help_text="What the agent is asked each time the job runs.")
    session = models.CharField(
        max_length=255, help_text="Key of the session that receives the answer, e.g. web:abc."
    )
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.EVERY)
    every_seconds = models.PositiveIntegerField(null=True, blank=True)
    cron_expr = models.CharField(
        max_length=120, blank=True, help_text="Five fields: minute hour day month weekday."
    )
    tz = models.CharField(max_length=64, default="UTC", help_text="IANA time zone of cron_expr.")
    at = models.DateTimeField(null=True, blank=True)
    enabled = models.BooleanField(default=True)
    # Carried from the agent's turn that scheduled the job (`agent.turn.owner_schedules`):
    # its runs keep to the tools that turn was limited to, and what waited for a person
    # there waits in them too, which a run with no one to ask refuses. A job made through
    # the API or the admin carries nothing.
    tools = models.JSONField(
        null=True,
        blank=True,
        default=None,
        validators=[validate_tools],
        help_text="The only tools its runs may use, as the turn that scheduled it was limited "
        'to, e.g. ["read_file"]; empty (null): every tool.',
    )
    approve_tools = tool_patterns_field(
        help_text="Tools that waited for a person's yes in the turn that scheduled it, besides "
        "AGENT_APPROVE_TOOLS and the owner's: its runs, with no one to ask, refuse them.",
    )
    last_run = models.DateTimeField(null=True, blank=True)
    last_status = models.CharField(max_length=16, choices=Status.choices, blank=True)
    last_error = models.TextField(blank=True)
    # When it runs next; empty while disabled or when it will not run again. Indexed: the
    # dispatchers look for the earliest every second.
    next_run = models.DateTimeField(null=True, blank=True, db_index=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        verbose_name = "cron job"

    def __str__(self) -> str:
        return f"{self.name} ({self.describe()})"

    @property
    def session_key(self) -> str:
        """The session its own turns run in."""
        return f"cron:{self.pk}"

    def describe(self) -> str:
        return timing.describe(
            kind=self.kind,
            every_seconds=self.every_seconds,
            cron_expr=self.cron_expr,
            tz=self.tz,
            at=self.at,
        )

    def clean(self) -> None:
        errors: dict[str, Any] = {}
        if self.kind == self.Kind.EVERY:
            if not self.every_seconds or self.every_seconds < timing.MIN_EVERY_SECONDS:
                errors["every_seconds"] = (
                    f"a job of kind 'every' needs every_seconds of at least "
                    f"{timing.MIN_EVERY_SECONDS}"
                )
            elif self.every_seconds > timing.MAX_EVERY_SECONDS:
                errors["every_seconds"] = (
                    f"at most {timing.MAX_EVERY_SECONDS} (ten years); use a cron expression"
                )
        elif self.kind == self.Kind.CRON:
            if not self.cron_expr:
                errors["cron_expr"] = "a job of kind 'cron' needs cron_expr, e.g. '0 9 * * *'"
            else:
                _collect(errors, timing.check_cron, self.cron_expr)
        elif self.kind == self.Kind.AT:
            if self.at is None:
                errors["at"] = "a job of kind 'at' needs the time to run at (ISO 8601)"
            elif self.enabled and self.last_run is None and self.at <= timezone.now():
                errors["at"] = f"{self.at.isoformat()} is in the past: the job would never run"
        else:
            errors["kind"] = "must be one of every, cron, at"
        _collect(errors, timing.zone, self.tz)
        if errors:
            raise ValidationError(errors)

    def plan(self, now: datetime) -> None:
        """Set `next_run` for a job just made, changed, or enabled at `now`."""
        self.next_run = (
            timing.first_run(
                kind=self.kind,
                every_seconds=self.every_seconds,
                cron_expr=self.cron_expr,
                tz=self.tz,
                at=self.at,
                now=now,
            )
            if self.enabled
            else None
        )

    def following(self, *, due: datetime, now: datetime) -> datetime | None:
        """When the job runs after the run that was due at `due` (None: not again). Raises
        what its timing does when that cannot be computed (a time zone gone, or fields
        changed behind validation's back)."""
        return timing.following(
            kind=self.kind,
            every_seconds=self.every_seconds,
            cron_expr=self.cron_expr,
            tz=self.tz,
            due=due,
            now=now,
        )


# What a change of makes a new plan necessary.
SCHEDULE_FIELDS = frozenset({"kind", "every_seconds", "cron_expr", "tz", "at", "enabled"})


def _collect(errors: dict[str, Any], check: Any, value: str) -> None:
    try:
        check(value)
    except ValidationError as exc:
        errors.update(exc.message_dict)
