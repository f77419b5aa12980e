from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models

from agent import tool_patterns


def validate_tool_patterns(value: Any) -> None:
    """A list of tool names or globs (`exec`, `mcp_*`)."""
    found = tool_patterns.problems(value)
    if found:
        raise ValidationError(found)


class Session(models.Model):
    """A conversation, keyed `channel:chat_id` (`web:abc`, `api:42`, `cli:direct`).

    Keys are unique per owner: every user has a key space of their own, so one user's key
    says nothing about another's, and a key deleted and used again by someone else is a
    new conversation. Sessions without an owner (the command line's, scheduled jobs')
    share one more key space.
    """

    key = models.CharField(max_length=255, db_index=True)
    channel = models.CharField(max_length=64, db_index=True)
    chat_id = models.CharField(max_length=190)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="agent_sessions",
    )
    title = models.CharField(max_length=200, blank=True)
    model = models.CharField(
        max_length=200, blank=True, help_text="litellm model id; empty uses AGENT_MODEL."
    )
    # Id of the last message already summarised into memory; history past it is raw.
    last_consolidated = models.BigIntegerField(default=0)
    # Set while a consolidation of this session runs (a lease: a dead worker's expires).
    consolidating_until = models.DateTimeField(null=True, blank=True)
    # The run whose turn started last, under the session's lock (a fencing token). A turn
    # that lost the lock mid-way (its database connection was dropped) finds another run
    # here once a second turn has started, and writes nothing more.
    turn = models.UUIDField(null=True, blank=True, editable=False)
    approve_tools = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_tool_patterns],
        help_text="Tools that wait for a person's yes in this session, besides the others "
        '(AGENT_APPROVE_TOOLS, the owner\'s, the skills\'): a list such as ["exec", "mcp_*"].',
    )
    allowed_tools = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_tool_patterns],
        help_text="Tools answered 'always' in this session: they no longer wait here.",
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated"]
        indexes = [models.Index(fields=["owner", "-updated"])]
        constraints = [
            models.UniqueConstraint(fields=["owner", "key"], name="session_key_per_owner"),
            models.UniqueConstraint(
                fields=["key"],
                condition=models.Q(owner__isnull=True),
                name="session_key_without_owner",
            ),
        ]

    def __str__(self) -> str:
        return self.title or self.key


class Message(models.Model):
    """One message of a session, stored in full; `id` gives the stable order.

    A run's messages are numbered in the order its turn produced them (`seq`, from 1), one
    row per number: a write run again after its commit's reply was lost saves nothing twice.
    Messages of no run (a delivered post) have no number.
    """

    class Role(models.TextChoices):
        SYSTEM = "system"
        USER = "user"
        ASSISTANT = "assistant"
        TOOL = "tool"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="messages")
    run = models.ForeignKey(
        "Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="messages"
    )
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField(null=True, blank=True)
    tool_calls = models.JSONField(null=True, blank=True)
    tool_call_id = models.CharField(max_length=128, blank=True)
    name = models.CharField(max_length=128, blank=True)
    reasoning_content = models.TextField(blank=True)
    usage = models.JSONField(null=True, blank=True)
    seq = models.PositiveIntegerField(null=True, blank=True, editable=False)
    # Set by /new: the message stays on record but leaves the conversation.
    archived = models.BooleanField(default=False)
    # The reply of a turn stopped while it was being written: what was said so far.
    stopped = models.BooleanField(default=False)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["session", "archived", "id"])]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="message_seq_per_run")]

    def __str__(self) -> str:
        return f"{self.role}: {(self.content or '')[:60]}"

    def as_llm_message(self) -> dict[str, Any]:
        """The message as the model is sent it (OpenAI chat format)."""
        message: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        if self.role == self.Role.TOOL:
            message["tool_call_id"] = self.tool_call_id
            message["name"] = self.name
        if self.reasoning_content:
            message["reasoning_content"] = self.reasoning_content
        return message


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
    approve_tools = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_tool_patterns],
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


class UserPreferences(models.Model):
    """What a user adds to the agent's settings for their own turns."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_preferences"
    )
    approve_tools = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_tool_patterns],
        help_text="Tools that wait for this user's yes in all their sessions: a list such as "
        '["exec", "mcp_*"].',
    )
    # The limits of the agent's turn that last wrote the user's HEARTBEAT.md with a file
    # tool, which the heartbeat keeps to: what such a turn writes there runs later, on its
    # own, and must not do more than that turn could (`agent.turn.heartbeat`).
    heartbeat_tools = models.JSONField(
        null=True,
        blank=True,
        default=None,
        help_text="The only tools the heartbeat may use, as the turn that last wrote "
        "HEARTBEAT.md was limited to; empty (null): every tool.",
    )
    heartbeat_approve_tools = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_tool_patterns],
        help_text="Tools that waited for a person in the turn that last wrote HEARTBEAT.md: "
        "the heartbeat, with no one to ask, refuses them.",
    )
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "user preferences"

    def __str__(self) -> str:
        return f"preferences of {self.user}"


class Memory(models.Model):
    """What the agent remembers. Without a session: the owner's long-term memory, shared by
    all their sessions (one per owner). With one: a summary of part of that session's
    history, written when it was consolidated or archived by /new."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="agent_memories",
    )
    session = models.ForeignKey(
        Session, null=True, blank=True, on_delete=models.CASCADE, related_name="memories"
    )
    content = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated", "-id"]
        verbose_name_plural = "memories"
        indexes = [models.Index(fields=["owner", "session", "-id"])]

    def __str__(self) -> str:
        where = self.session.key if self.session is not None else "long-term"
        return f"{where}: {self.content[:60]}"


class Relayed(models.Model):
    """A channel-layer message for a session's sockets, written by a process that shares no
    channel layer with the web server (a worker, when there is no Redis). The web server
    reads these and passes them on (`agent.turn.relay`); they are kept for minutes."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    message = models.JSONField()
    # The process that wrote it, which does not read it back.
    origin = models.CharField(max_length=100)
    created = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.message.get('type', '?')} for session {self.session_id} from {self.origin}"


class DailyUsage(models.Model):
    """What one user's runs of one model used and cost on one UTC day, added to as each run
    ends (in the transaction that records it). The usage pages and the daily budget read
    this rather than the runs: one row per model a day, and it outlives the conversations,
    since deleting one does not give back what it cost."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="agent_usage",
    )
    day = models.DateField(help_text="The UTC day the runs ended.")
    model = models.CharField(max_length=200, blank=True)
    runs = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)
    total_tokens = models.PositiveBigIntegerField(default=0)
    priced_cost = models.DecimalField(
        max_digits=14,
        decimal_places=6,
        default=0,
        help_text="USD, of the runs whose model has a known price.",
    )
    unpriced_runs = models.PositiveIntegerField(
        default=0, help_text="Runs that used tokens of a model with no known price."
    )

    class Meta:
        ordering = ["-day", "model"]
        verbose_name_plural = "daily usage"
        constraints = [
            models.UniqueConstraint(fields=["owner", "day", "model"], name="usage_per_owner_day"),
            models.UniqueConstraint(
                fields=["day", "model"],
                condition=models.Q(owner__isnull=True),
                name="usage_per_day_without_owner",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.owner or 'no account'} {self.day} {self.model}"


class UserBudget(models.Model):
    """A user's own daily budget, set by staff: lifted altogether, or an amount other than
    the site's AGENT_USER_DAILY_BUDGET."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_budget"
    )
    unlimited = models.BooleanField(
        default=False, help_text="No daily budget for this user, whatever the site's is."
    )
    daily_budget = models.DecimalField(
        max_digits=12,
        decimal_places=2,
        null=True,
        blank=True,
        validators=[MinValueValidator(0)],
        help_text="USD this user's runs may cost per UTC day; empty: AGENT_USER_DAILY_BUDGET.",
    )

    def __str__(self) -> str:
        if self.unlimited:
            return f"{self.user}: no daily budget"
        if self.daily_budget is None:
            return f"{self.user}: the site's daily budget"
        return f"{self.user}: ${self.daily_budget} a day"


class SpendingHold(models.Model):
    """What a running turn, or a consolidation, of a user holds of their daily budget: what
    its model calls have cost so far, and the most the call it is making may cost. Until it
    ends, none of this is in the ledger (`DailyUsage`), and every check of the user's budget
    counts it beside the ledger. It goes in the transaction that adds its run to the ledger,
    when the sweep finds its run dead, or once `expires` has passed (no check counts it
    then)."""

    # The run's id, or a consolidation's own.
    id = models.UUIDField(primary_key=True, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    amount = models.DecimalField(max_digits=14, decimal_places=6, default=0, help_text="USD.")
    # Pushed on with each model call it holds for.
    expires = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["owner", "expires"], name="spending_hold_owner")]

    def __str__(self) -> str:
        return f"{self.owner_id} holds ${self.amount} until {self.expires:%H:%M}"
