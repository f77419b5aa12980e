"""MCP servers: programs or HTTP endpoints whose tools the agent is offered as
`mcp_<server>_<tool>`. Site-wide, like skills: staff add them, every user's agent uses them."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

# A server's name is part of its tools' names, which providers limit to [A-Za-z0-9_-]{1,64}.
NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,31}$"
MAX_TOOL_TIMEOUT = 3600
# What a shell and `os.environ` accept as a variable's name (POSIX portable names).
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# RFC 9110's `token`: anything else breaks the request line or is refused by the client.
HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# Printable ASCII, spaces and tabs: a line break would smuggle in a header of its own, and
# the HTTP client encodes header values as ASCII.
HEADER_VALUE = re.compile(r"[\t\x20-\x7e]*")


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
        help_text="Its tools are offered to the model as mcp_NAME_TOOL.",
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
    trusted = models.BooleanField(
        default=False,
        help_text="http: let it reach loopback and private addresses (127.0.0.1, 10.x, the "
        "cloud metadata address …). Off, its connections pass the same network guard as "
        "web_fetch: public internet addresses only. Only for servers you run yourself.",
    )
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
        # What the other transport would use is dropped rather than refused: switching a
        # server over must not keep the old one's secrets around unseen.
        if self.transport == self.Transport.STDIO:
            self.url, self.headers, self.trusted = "", {}, False
        elif self.transport == self.Transport.HTTP:
            self.command, self.args, self.env = "", [], {}
        errors: dict[str, Any] = {}
        # The field's validator lets one through: its `$` matches before a final line break.
        if self.name.endswith("\n"):
            errors["name"] = "A name may not end in a line break."
        if self.transport == self.Transport.STDIO:
            if not self.command.strip():
                errors["command"] = "A stdio server needs the command that starts it."
            elif "\x00" in self.command:
                errors["command"] = "The command may not contain a NUL character."
        if self.transport == self.Transport.HTTP:
            problem = url_problem(self.url)
            if problem:
                errors["url"] = problem
        if not isinstance(self.args, list) or not all(isinstance(a, str) for a in self.args):
            errors["args"] = 'A list of strings, e.g. ["-y", "some-server"].'
        elif any("\x00" in a for a in self.args):
            errors["args"] = "An argument may not contain a NUL character."
        for field in ("env", "headers"):
            value = getattr(self, field)
            if not isinstance(value, dict) or not all(
                isinstance(k, str) and k and isinstance(v, str) for k, v in value.items()
            ):
                errors[field] = "An object of names to string values."
        if "env" not in errors:
            problem = env_problem(self.env)
            if problem:
                errors["env"] = problem
        if "headers" not in errors:
            problem = headers_problem(self.headers)
            if problem:
                errors["headers"] = problem
        if errors:
            raise ValidationError(errors)


# The messages below name keys, never values: a value may be a secret.


def url_problem(url: str) -> str | None:
    if not url.strip():
        return "An HTTP server needs its URL."
    if not url.startswith(("http://", "https://")):
        return "The URL must start with http:// or https://."
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        return "The URL may not contain spaces or control characters."
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises on a port that is not a number in range)
    except ValueError:
        return "The URL is not valid."
    if not parts.hostname:
        return "The URL needs a host."
    return None


def env_problem(env: dict[str, str]) -> str | None:
    for name, value in env.items():
        if not ENV_NAME.fullmatch(name):
            return (
                f"{name!r} is not a valid variable name: letters, digits and '_', "
                "not starting with a digit."
            )
        if "\x00" in value:
            return f"The value of {name} may not contain a NUL character."
    return None


def headers_problem(headers: dict[str, str]) -> str | None:
    seen: set[str] = set()
    for name, value in headers.items():
        if not HEADER_NAME.fullmatch(name):
            return f"{name!r} is not a valid header name."
        if name.lower() in seen:
            return f"The header {name} is given twice (header names ignore case)."
        seen.add(name.lower())
        if not HEADER_VALUE.fullmatch(value):
            return (
                f"The value of {name} must be printable ASCII on one line "
                "(no line breaks or control characters)."
            )
    return None
