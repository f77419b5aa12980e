"""Writes to MCP servers. Keyword-only, one transaction each, every write through the
model's `full_clean`: the API and the admin refuse the same things (`ValidationError`
names the field). `MASK` as a value of `env` or `headers` keeps the stored value."""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from mcp_app.masking import unmask
from mcp_app.models import McpServer

logger = logging.getLogger(__name__)

TAKEN = "An MCP server with this name already exists."


def unmask_secrets(server: McpServer, fields: dict[str, Any]) -> dict[str, Any]:
    """`fields` with the masked values of `env` and `headers` replaced by `server`'s."""
    fields = dict(fields)
    errors: dict[str, list[str]] = {}
    for name, ignore_case in (("env", False), ("headers", True)):
        if name in fields:
            try:
                fields[name] = unmask(fields[name], getattr(server, name), ignore_case=ignore_case)
            except ValidationError as exc:
                errors[name] = exc.messages
    if errors:
        raise ValidationError(errors)
    return fields


def _save(server: McpServer) -> None:
    server.full_clean()
    try:
        # A savepoint: a name taken between the check and the write must not break the
        # caller's transaction.
        with transaction.atomic():
            server.save()
    except IntegrityError:
        if McpServer.objects.filter(name=server.name).exclude(pk=server.pk).exists():
            raise ValidationError({"name": [TAKEN]}) from None
        raise


@transaction.atomic
def create_server(**fields: Any) -> McpServer:
    server = McpServer()
    for name, value in unmask_secrets(server, fields).items():
        setattr(server, name, value)
    _save(server)
    logger.info("MCP server %s added (%s)", server.name, server.transport)
    return server


@transaction.atomic
def update_server(*, server: McpServer, **fields: Any) -> McpServer:
    """Change the fields given; the others stay as they are."""
    old_name = server.name
    for name, value in unmask_secrets(server, fields).items():
        setattr(server, name, value)
    _save(server)
    logger.info(
        "MCP server %s changed (%s)",
        server.name if server.name == old_name else f"{old_name} -> {server.name}",
        ", ".join(sorted(fields)) or "nothing",
    )
    return server


def set_enabled(*, server: McpServer, enabled: bool) -> McpServer:
    """Switch a server on (checked against the rules first) or off (always possible, even
    for a server saved before a rule it breaks existed)."""
    if server.enabled == enabled:
        return server
    if enabled:
        return update_server(server=server, enabled=True)
    server.enabled = False
    server.save(update_fields=["enabled", "updated"])
    logger.info("MCP server %s disabled", server.name)
    return server


def delete_server(*, server: McpServer) -> None:
    name = server.name
    server.delete()
    logger.info("MCP server %s deleted", name)
