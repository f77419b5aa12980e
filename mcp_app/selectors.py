"""Reads of MCP servers."""

from __future__ import annotations

from django.db.models import QuerySet

from mcp_app.models import McpServer

# What the agent needs to reach a server, and `updated` to tell that its settings changed.
RUNTIME_FIELDS = (
    "id",
    "name",
    "transport",
    "command",
    "args",
    "env",
    "url",
    "headers",
    "enabled",
    "trusted",
    "tool_timeout",
    "updated",
)


def list_servers() -> QuerySet[McpServer]:
    return McpServer.objects.all()


def find_server(*, name: str) -> McpServer | None:
    return McpServer.objects.filter(name=name).first()


def enabled_servers() -> list[McpServer]:
    """The enabled servers by name, in one query, loaded whole but for `created` (deferred:
    reading it would cost a query, and from async code fail). Called at the start of every
    turn, so it stays a single indexed-table read of a handful of rows."""
    return list(McpServer.objects.filter(enabled=True).only(*RUNTIME_FIELDS))
