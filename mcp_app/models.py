"""MCP servers: programs or HTTP endpoints whose tools the agent is offered as
`mcp_<server>_<tool>`. Site-wide, like skills: staff add them, every user's agent uses them."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

# A server's name is part of its tools' names, which providers limit to [A-Za-z0-9_-]{1,64}.
NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,31}$"
MAX_TOOL_TIMEOUT = 3600


class McpServer(models.Model):
    class Transport(models.TextChoices):
        STDIO = "stdio", "stdio (a command the server starts)"
        HTTP = "http", "streamable HTTP (a URL)"

    name = models.CharField(
        max_length=32,
        unique=True,
        validators=[
            RegexValidator(
                NAME_PATTERN,
                "Use lower-case letters, digits, '-' and '_', starting with a letter or digit.",
            )
        ],
        help_text="Its tools are offered as mcp_<name>_<tool>.",
    )
    transport = models.CharField(max_length=8, choices=Transport.choices)
    command = models.CharField(
        max_length=500, blank=True, help_text="stdio: the program to start, e.g. npx."
    )
    args = models.JSONField(default=list, blank=True, help_text="stdio: its arguments, a list.")
    env = models.JSONField(
        default=dict,
        blank=True,
        help_text="stdio: environment variables for it; the server's own are not passed on.",
    )
    url = models.CharField(max_length=2000, blank=True, help_text="http: the endpoint's URL.")
    headers = models.JSONField(
        default=dict, blank=True, help_text="http: headers sent with every request."
    )
    enabled = models.BooleanField(default=True)
    tool_timeout = models.PositiveIntegerField(
        default=30,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_TOOL_TIMEOUT)],
        help_text="Seconds a tool call may take before the model is told it timed out.",
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "MCP server"

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        errors: dict[str, Any] = {}
        if self.transport == self.Transport.STDIO and not self.command.strip():
            errors["command"] = "A stdio server needs the command that starts it."
        if self.transport == self.Transport.HTTP:
            if not self.url.strip():
                errors["url"] = "An HTTP server needs its URL."
            elif not self.url.startswith(("http://", "https://")):
                errors["url"] = "The URL must start with http:// or https://."
        if not isinstance(self.args, list) or not all(isinstance(a, str) for a in self.args):
            errors["args"] = 'A list of strings, e.g. ["-y", "some-server"].'
        for field in ("env", "headers"):
            value = getattr(self, field)
            if not isinstance(value, dict) or not all(
                isinstance(k, str) and k and isinstance(v, str) for k, v in value.items()
            ):
                errors[field] = "An object of names to string values."
        if errors:
            raise ValidationError(errors)
