"""Tools the agent can call, the registry that runs them, and the guards they share."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path

from agent.tools.background import CronTool, SpawnTool, SubagentTool
from agent.tools.base import Agents, Deliver, JobInfo, Schedules, Tool, ToolContext, ToolError
from agent.tools.files import (
    AppendFileTool,
    EditFileTool,
    GlobTool,
    ListDirTool,
    ReadFileTool,
    WriteFileTool,
)
from agent.tools.guards import AddressGuard, GuardError, Workspace, cap_output, check_command
from agent.tools.messaging import MessageTool
from agent.tools.registry import ToolRegistry, TurnTools
from agent.tools.sandbox import Limits
from agent.tools.shell import ExecTool
from agent.tools.skills import ReadSkillTool
from agent.tools.web import WebFetchTool, WebSearchTool, WebSettings

logger = logging.getLogger(__name__)

__all__ = [
    "AddressGuard",
    "Agents",
    "AppendFileTool",
    "CronTool",
    "Deliver",
    "EditFileTool",
    "ExecTool",
    "GlobTool",
    "GuardError",
    "JobInfo",
    "Limits",
    "ListDirTool",
    "MessageTool",
    "ReadFileTool",
    "ReadSkillTool",
    "Schedules",
    "SpawnTool",
    "SubagentTool",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolRegistry",
    "TurnTools",
    "WebFetchTool",
    "WebSearchTool",
    "WebSettings",
    "Workspace",
    "WriteFileTool",
    "build_registry",
    "cap_output",
    "check_command",
]


def build_registry(
    *,
    workspace: Path,
    restrict_to_workspace: bool = True,
    exec_timeout: int = 60,
    exec_env: Mapping[str, str] | None = None,
    exec_limits: Limits | None = None,
    web: WebSettings | None = None,
    extra: Iterable[Tool] = (),
) -> ToolRegistry:
    """A registry with the file tools and ``exec``, all fenced to ``workspace``, the web
    tools, ``message``, the skill reader, the sub-agent and cron tools, then the ``extra``
    tools (one of the same name replaces a built-in one).

    ``exec_env`` is the environment shell commands start from; None inherits the server's,
    so pass a scrubbed mapping when the server's environment holds secrets. ``exec_limits``
    bounds what a sandboxed command may use. ``web`` configures the web tools, and its
    ``allow_private`` also governs the URLs ``exec`` commands may name.
    """
    web = web or WebSettings()
    ws = Workspace(workspace, restrict=restrict_to_workspace)
    ws.root.mkdir(parents=True, exist_ok=True)
    registry = ToolRegistry()
    for tool in (
        ReadFileTool(ws),
        WriteFileTool(ws),
        EditFileTool(ws),
        AppendFileTool(ws),
        ListDirTool(ws),
        GlobTool(ws),
        ExecTool(
            ws,
            timeout=exec_timeout,
            env=exec_env,
            limits=exec_limits,
            allow_private=web.allow_private,
        ),
        WebSearchTool(web),
        WebFetchTool(web),
        MessageTool(),
        ReadSkillTool(ws.root, exec_env if exec_env is not None else {}),
        SpawnTool(),
        SubagentTool(),
        CronTool(),
        *extra,
    ):
        registry.register(tool)
    return registry
