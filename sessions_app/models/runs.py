"""Turns: the record of each run, and the tool calls of one that wait for a person."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from agent.tool_fields import tool_patterns_field
from sessions_app.models.sessions import Session

# How often the process running a turn marks its run alive (`Run.last_alive`).
MARK_ALIVE_SECONDS = 5
# A run last marked alive this long ago belongs to a process that died (four marks missed).
STALE_AFTER_SECONDS = 20


class Run(models.Model):
    """The record of one turn: what it cost, how long it took, how it ended."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        # Its model asked for tools that wait for a person (`Approval`): no process runs
        # it until the answers are in, or their time is up.
        WAITING = "waiting"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="runs")
    # Whose message started the turn, and so whose turn it is: in a team chat, which
    # member's budget, rate and policy it used; elsewhere the session's owner.
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    channel = models.CharField(max_length=64)
    status = models.CharField(
        max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True
    )
    prompt = models.TextField()
    model = models.CharField(max_length=200, blank=True)
    text = models.TextField(null=True, blank=True)
    error = models.TextField(null=True, blank=True)
    iterations = models.PositiveIntegerField(default=0)
    tools_used = models.JSONField(default=list, blank=True)
    usage = models.JSONField(default=dict, blank=True)
    cost = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    # Set once its usage and cost are added to the daily ledger (`DailyUsage`): a record
    # written again after its commit's reply was lost adds nothing twice.
    counted = models.BooleanField(default=False, editable=False)
    # A sub-agent's run: the session that spawned it, which hears how it ended.
    parent = models.ForeignKey(
        Session,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="subagent_runs",
    )
    label = models.CharField(max_length=100, blank=True)
    # The run whose turn started this one: a sub-agent's parent run.
    parent_run = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="subagents"
    )
    # The user's message (now archived) this run's turn says again, edited or as it was:
    # the earlier version of the conversation from that message on (`sessions_app.versions`).
    replaces = models.ForeignKey(
        "sessions_app.Message",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        editable=False,
    )
    # The job a cron run ran for.
    cron_job = models.ForeignKey(
        "cron_app.CronJob", null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    # Every model call and tool call of the turn, in order (`agent.turn.trace`). A list on
    # the run rather than a table of steps: it is saved by the statements that already save
    # the run's messages and its ending, and read with the run, so recording it costs no
    # statement or query of its own; a turn makes at most AGENT_MAX_ITERATIONS model calls,
    # so the list stays small.
    trace = models.JSONField(default=list, blank=True)
    # What the turn may use: null, every tool its kind of turn has; a list, those tools
    # alone; false, none and no agent either (one direct generation from the model).
    tools = models.JSONField(null=True, blank=True, default=None)
    # What waited for a person in the turn that started this one (a sub-agent's parent, the
    # turn that scheduled a cron job, the sub-agent an announcement reports), beyond what
    # every turn of the owner gets anyway: it waits here too, or is refused where no one can
    # be asked (`agent.turn.approvals`).
    approve_tools = tool_patterns_field(
        help_text="Tools that waited for a person in the turn that started this one, besides "
        "AGENT_APPROVE_TOOLS and the owner's: they wait in this turn too.",
    )
    # Set by /stop or a cancel from any process; the process running the turn notices it.
    cancel_requested = models.BooleanField(default=False)
    created = models.DateTimeField(auto_now_add=True)
    started = models.DateTimeField(null=True, blank=True)
    # Marked every few seconds while the turn runs: a run no longer marked alive belongs to
    # a process that died, and is not running any more whatever its status says. The column
    # keeps its earlier name: processes of the release before, still running during an
    # upgrade, read and write it.
    last_alive = models.DateTimeField(null=True, blank=True, db_column="heartbeat")
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.session.key} {self.status} {self.created:%Y-%m-%d %H:%M}"

    @property
    def duration(self) -> float | None:
        if self.started and self.finished:
            return (self.finished - self.started).total_seconds()
        return None

    @property
    def success(self) -> bool:
        return self.status == self.Status.SUCCEEDED


class Approval(models.Model):
    """A tool call of a waiting run that runs only once a person says yes.

    Answered once: the first answer (or the timeout, or a stop) changes `status` from
    pending, with a conditional update, and every later one finds it taken.
    """

    class Status(models.TextChoices):
        PENDING = "pending"
        ALLOWED = "allowed"
        DECLINED = "declined"
        # No answer came within AGENT_APPROVAL_TIMEOUT.
        EXPIRED = "expired"
        # The turn was stopped, or a new turn of its session came first.
        CANCELLED = "cancelled"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="approvals")
    call_id = models.CharField(max_length=128)
    name = models.CharField(max_length=128)
    # The arguments as the tool would get them (the raw text when they were no JSON object).
    arguments = models.JSONField(null=True, blank=True)
    # Its place among the calls of the model's answer.
    position = models.PositiveIntegerField(default=0)
    status = models.CharField(
        max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True
    )
    # Answered "always": the tool no longer waits in this session.
    always = models.BooleanField(default=False)
    created = models.DateTimeField(auto_now_add=True)
    deadline = models.DateTimeField()
    answered = models.DateTimeField(null=True, blank=True)
    answered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta:
        ordering = ["created", "position"]
        constraints = [
            models.UniqueConstraint(fields=["run", "call_id"], name="approval_call_per_run")
        ]
        indexes = [models.Index(fields=["status", "deadline"])]

    def __str__(self) -> str:
        return f"{self.name} ({self.status})"

    @property
    def allowed(self) -> bool:
        return self.status == self.Status.ALLOWED
