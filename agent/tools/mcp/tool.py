"""MCP tools as the model sees them: one `Tool` per remote tool, and their results as text."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from agent.tools.base import Tool, ToolContext, ToolError
from agent.tools.guards import cap_output

if TYPE_CHECKING:
    from agent.tools.mcp.config import McpServerConfig

# Providers accept tool names of [A-Za-z0-9_-]{1,64} only.
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
MAX_NAME = 64
# A remote server's answer is not ours to bound; the model's context is.
MAX_RESULT_CHARS = 100_000


class CallsTools(Protocol):
    """What a tool needs of the hub that made it (`McpHub`): a call of a server's tool."""

    async def call_tool(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        *,
        cancelled: asyncio.Event | None = None,
    ) -> str: ...


class McpTool(Tool):
    """A tool of an MCP server, called through the hub under its sanitised name."""

    time_limit = None  # the hub bounds each call by the server's `tool_timeout`

    def __init__(
        self,
        hub: CallsTools,
        *,
        server: str,
        remote_name: str,
        name: str,
        description: str,
        parameters: dict[str, Any],
        parallel_safe: bool = False,
    ) -> None:
        self._hub = hub
        self.server = server
        self.remote_name = remote_name
        self.name = name
        self.description = description
        self.parameters = parameters
        self.parallel_safe = parallel_safe

    async def execute(self, ctx: ToolContext, /, **kwargs: Any) -> str:
        try:
            return await self._hub.call_tool(
                self.server, self.remote_name, kwargs, cancelled=ctx.cancelled
            )
        except ToolError as exc:
            message = str(exc)
            return message if message.startswith("Error") else f"Error: {message}"


def make_tools(
    hub: CallsTools, config: McpServerConfig, listing: Iterable[Any]
) -> tuple[McpTool, ...]:
    """One `McpTool` per remote tool of ``listing`` (the SDK's `Tool` models), names unique."""
    tools: list[McpTool] = []
    taken: set[str] = set()
    for remote in listing:
        name = _unique(tool_name(config.name, remote.name), taken)
        taken.add(name)
        summary = (remote.description or "").strip() or remote.name
        tools.append(
            McpTool(
                hub,
                server=config.name,
                remote_name=remote.name,
                name=name,
                description=f"[MCP server '{config.name}'] {summary}",
                parameters=_object_schema(remote.input_schema),
                # Only on the server's word that the tool changes nothing.
                parallel_safe=bool(remote.annotations and remote.annotations.read_only_hint),
            )
        )
    return tuple(tools)


def tool_name(server: str, remote: str) -> str:
    """``mcp_<server>_<tool>`` in the characters and length providers accept."""
    return _UNSAFE.sub("_", f"mcp_{server}_{remote}")[:MAX_NAME]


def _unique(name: str, taken: set[str]) -> str:
    # Two remote names can sanitise or truncate to the same name; both stay callable.
    candidate, n = name, 2
    while candidate in taken:
        suffix = f"_{n}"
        candidate = name[: MAX_NAME - len(suffix)] + suffix
        n += 1
    return candidate


def _object_schema(schema: Any) -> dict[str, Any]:
    if not isinstance(schema, dict) or not schema:
        return {"type": "object", "properties": {}}
    schema = dict(schema)
    schema.setdefault("type", "object")
    if schema["type"] == "object":
        schema.setdefault("properties", {})
    return schema


def result_text(result: Any) -> str:
    """The text the model reads for a `CallToolResult`; an error result starts with "Error"."""
    parts = [text for item in result.content or () if (text := _content_text(item))]
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    text = cap_output("\n".join(parts), MAX_RESULT_CHARS)
    if result.is_error:
        if not text:
            return "Error: the MCP tool reported an error without details"
        return text if text.startswith("Error") else f"Error: {text}"
    return text or "(no output)"


def _content_text(item: Any) -> str:
    kind = getattr(item, "type", "")
    if kind == "text":
        return str(item.text)
    if kind in ("image", "audio"):
        return f"[{kind}: {item.mime_type}, {_decoded_size(item.data)} bytes]"
    if kind == "resource":
        resource = item.resource
        text = getattr(resource, "text", None)
        if text is not None:
            return str(text)
        mime = getattr(resource, "mime_type", None) or "application/octet-stream"
        size = _decoded_size(getattr(resource, "blob", ""))
        return f"[resource: {resource.uri}, {mime}, {size} bytes]"
    if kind == "resource_link":
        return str(item.uri)
    return f"[{kind or 'unknown'} content]"


def _decoded_size(data: str) -> int:
    # Base64 length says the size without decoding what may be megabytes.
    return len(data.rstrip("=")) * 3 // 4
