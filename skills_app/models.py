from __future__ import annotations

from django.db import models

# `validate_tool_patterns` is named here too: the migrations refer to it by this path.
from agent.tool_fields import tool_patterns_field, validate_tool_patterns  # noqa: F401


class Skill(models.Model):
    """Instructions the agent can follow: inlined in every prompt (`always`), or listed by
    name and description and read in full when the model needs them."""

    name = models.SlugField(max_length=64, unique=True, help_text="A unique slug, e.g. weather.")
    description = models.CharField(max_length=300, help_text="When the skill is useful.")
    content = models.TextField(help_text="The skill itself, in Markdown.")
    always = models.BooleanField(default=False, help_text="Inline it in every prompt.")
    approve_tools = tool_patterns_field(
        help_text="Tools that wait for a person's yes while the skill is offered: a list such "
        'as ["exec", "mcp_*"].',
    )
    enabled = models.BooleanField(default=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
