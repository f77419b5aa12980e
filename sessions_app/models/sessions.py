"""Conversations: a session, its messages, the memories written from them, and what a
worker leaves for the web server to pass to the session's sockets."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models

from agent.tool_fields import tool_patterns_field


class Session(models.Model):
    """A conversation, keyed `channel:chat_id` (`web:abc`, `api:42`, `cli:direct`).

    Keys are unique per owner: every user has a key space of their own, so one user's key
    says nothing about another's, and a key deleted and used again by someone else is a
    new conversation. Sessions without an owner (the command line's, scheduled jobs')
    share one more key space.

    A team chat (`team:<id>`) belongs to a team (a Django group) and to no one person: it
    has no owner, so that no query of a person's own sessions ever finds it, and every
    member reaches it through the team (`selectors.find_session`).
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
    team = models.ForeignKey(
        "auth.Group",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="agent_sessions",
        help_text="The team whose chat this is: every member reads and writes it.",
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
    approve_tools = tool_patterns_field(
        help_text="Tools that wait for a person's yes in this session, besides the others "
        '(AGENT_APPROVE_TOOLS, the owner\'s, the skills\'): a list such as ["exec", "mcp_*"].',
    )
    allowed_tools = tool_patterns_field(
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


class Memory(models.Model):
    """What the agent remembers. Without a session: the owner's long-term memory, shared by
    all their sessions (one per owner), or with `team`, the team's, shared by its chats.
    With one: a summary of part of that session's history, written when it was
    consolidated or archived by /new."""

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
    team = models.ForeignKey(
        "auth.Group",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="agent_memories",
        help_text="The team whose memory this is (its team chats'); empty for a person's.",
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
