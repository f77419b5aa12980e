"""What a user adds to the agent's settings for their own turns."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from agent.tool_fields import tool_patterns_field


class UserPreferences(models.Model):
    """What a user adds to the agent's settings for their own turns."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_preferences"
    )
    approve_tools = tool_patterns_field(
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
    heartbeat_approve_tools = tool_patterns_field(
        help_text="Tools that waited for a person in the turn that last wrote HEARTBEAT.md: "
        "the heartbeat, with no one to ask, refuses them.",
    )
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "user preferences"

    def __str__(self) -> str:
        return f"preferences of {self.user}"
