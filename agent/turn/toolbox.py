"""The process's tool registry: the built-in tools and the ones `AGENT_TOOLS` names; and
the operator's hooks that see each turn's tool calls.

Made once and kept while the settings that shape it stay the same, so a turn pays nothing
for it and long-lived clients held by tools survive from turn to turn; each turn binds its
own context to it (`ToolRegistry.for_turn`). The hooks file is looked at once per turn (a
`stat`) and read again when it changed.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from agent.conf import AgentSettings
from agent.tools import Limits, ToolRegistry, WebSettings, build_registry
from agent.tools.hook_config import HookSet, load_hooks
from agent.tools.mcp import McpServerConfig, mcp_hub
from agent.tools.registry import load_tools
from agent.turn import store

logger = logging.getLogger(__name__)

_lock = threading.Lock()
# A registry per shape of the settings: teams' policies give their members' turns a few
# shapes at once (`exec` with or without the network), and each is made once. The oldest goes
# when the settings change past a few.
_KEPT = 4
_registries: dict[tuple[Any, ...], ToolRegistry] = {}


def tool_registry(conf: AgentSettings) -> ToolRegistry:
    """The registry for `conf`, made on first use and when the settings change."""
    key = _shape(conf)
    with _lock:
        registry = _registries.get(key)
        if registry is None:
            registry = _registries[key] = _build(conf)
            while len(_registries) > _KEPT:
                del _registries[next(iter(_registries))]
        return registry


async def offered_tools(conf: AgentSettings) -> ToolRegistry:
    """The tools a turn of the person whose settings are `conf` is offered (before what
    its kind of turn or its door leaves out)."""
    return not_theirs(await turn_registry(conf), conf)


def not_theirs(registry: ToolRegistry, conf: AgentSettings) -> ToolRegistry:
    """`registry` less what a person's policy keeps from their agent (`conf` is theirs,
    `agent.turn.policies`): the tools it does not allow, and those of MCP servers assigned
    to teams they are not in."""
    names = registry.names()
    hidden = {
        name
        for name in names
        if (conf.allowed_tools is not None and name not in conf.allowed_tools)
        or getattr(registry.get(name), "server", None) in conf.hidden_mcp_servers
    }
    return registry.without(frozenset(hidden)) if hidden else registry


def _shape(conf: AgentSettings) -> tuple[Any, ...]:
    return (
        conf.workspace,
        conf.restrict_to_workspace,
        conf.exec_timeout,
        tuple(sorted(conf.exec_env.items())),
        conf.exec_max_processes,
        conf.exec_memory_mb,
        conf.exec_network,
        conf.exec_uid,
        conf.web_allow_private,
        conf.web_timeout,
        conf.brave_api_key,
        conf.brave_search_url,
        conf.duckduckgo_url,
        conf.tools,
    )


def _build(conf: AgentSettings) -> ToolRegistry:
    registry = _built_in(conf)
    tools, problems = load_tools(conf.tools, taken=registry.names())
    for problem in problems:
        # Start-up refuses these (the system check, `tool_problems`); a process started some
        # other way serves without the tool rather than failing every turn.
        logger.error("%s; the site runs without it", problem)
    for tool in tools:
        registry.register(tool)
    return registry


def _built_in(conf: AgentSettings) -> ToolRegistry:
    conf.workspace.mkdir(parents=True, exist_ok=True)
    return build_registry(
        workspace=conf.workspace,
        restrict_to_workspace=conf.restrict_to_workspace,
        exec_timeout=conf.exec_timeout,
        exec_env=conf.exec_env,
        exec_limits=Limits(
            max_processes=conf.exec_max_processes,
            memory_mb=conf.exec_memory_mb,
            network=conf.exec_network,
            host_uid=conf.exec_uid,
        ),
        web=WebSettings(
            allow_private=conf.web_allow_private,
            timeout=conf.web_timeout,
            brave_api_key=conf.brave_api_key,
            brave_search_url=conf.brave_search_url,
            duckduckgo_url=conf.duckduckgo_url,
        ),
    )


def tool_problems(conf: AgentSettings) -> list[str]:
    """One line for each `AGENT_TOOLS` entry that gives no tool, saying which and why. Makes
    the tools afresh, keeping none: the process that asks may fork workers next."""
    if not conf.tools:
        return []
    return load_tools(conf.tools, taken=_built_in(conf).names())[1]


def turn_hooks(conf: AgentSettings) -> HookSet:
    """The hooks a turn starting now runs. Start-up refuses a broken hooks file or a hook
    function that cannot be imported (`hook_problems`); one that breaks while the site runs
    is logged, and the turn's tool calls are blocked until it is mended: its guards cannot
    be told apart from the rest of it, and a guard that is skipped is no guard. The turn
    itself goes on, and the model reads why its calls were not made."""
    hooks, problems = _hooks(conf)
    if not problems:
        return hooks
    for problem in problems:
        logger.error("%s; the turn's tool calls are blocked until it is fixed", problem)
    return HookSet(broken=tuple(problems))


def hook_problems(conf: AgentSettings) -> list[str]:
    """One line for each problem of the hooks file and each `AGENT_HOOKS` entry that gives
    no function, saying which and why."""
    return _hooks(conf)[1]


def _hooks(conf: AgentSettings) -> tuple[HookSet, list[str]]:
    if conf.hooks_file:  # named on purpose: it must be there
        return load_hooks(Path(conf.hooks_file).resolve(), conf.hooks, required=True)
    return load_hooks(conf.workspace / "hooks.json", conf.hooks, required=False)


async def turn_registry(conf: AgentSettings) -> ToolRegistry:
    """The process's registry with the tools of the enabled MCP servers.

    Their settings are read at every turn (one query), so a change made in the admin or the
    API reaches every process at its next turn; the process-wide hub keeps the connections
    and makes one only when a server is first needed."""
    servers = await mcp_servers(conf)
    hub = mcp_hub()
    hub.configure(servers)
    registry = tool_registry(conf)
    if not servers:
        return registry
    return registry.with_tools(tuple(await hub.tools()))


async def unknown_tools(names: list[str], conf: AgentSettings) -> list[str]:
    """Those of `names` that no turn's registry holds. MCP servers are connected only when
    a name is not among the tools known without them."""
    known = set(known_tool_names(conf))
    missing = [name for name in names if name not in known]
    if not missing:
        return []
    registry = await turn_registry(conf)
    return [name for name in missing if name not in registry]


def known_tool_names(conf: AgentSettings) -> list[str]:
    """Every tool's name, of MCP servers only those already connected: connects nothing."""
    return [*tool_registry(conf).names(), *(tool.name for tool in mcp_hub().known_tools())]


async def mcp_servers(conf: AgentSettings) -> list[McpServerConfig]:
    """The enabled MCP servers as the hub takes them.

    stdio servers start in a folder of the site's data, never in the workspace: the model
    writes there, and programs look for code in the folder they start in (`python -m`,
    `npx`), which would run it outside the sandbox."""
    rows = await store.enabled_mcp_servers()
    if not rows:
        return []
    folder = conf.data_dir / "mcp"
    configs = []
    for row in rows:
        try:
            configs.append(
                McpServerConfig(
                    name=row.name,
                    transport=row.transport,
                    command=row.command,
                    args=tuple(row.args),
                    env=tuple(sorted(row.env.items())),
                    url=row.url,
                    headers=tuple(sorted(row.headers.items())),
                    tool_timeout=float(row.tool_timeout),
                    trusted=bool(row.trusted),
                    cwd=str(folder),
                )
            )
        except (ValueError, TypeError, AttributeError) as exc:  # a row the admin let through
            logger.warning("MCP server %r is left out: %s", row.name, exc)
    return configs
