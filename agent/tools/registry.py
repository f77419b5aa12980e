"""The tool registry: looks tools up, validates arguments, and never raises into the loop.

A `ToolRegistry` lives as long as its process: its tools, their schemas' validators and
any long-lived clients they hold are made once. Each turn sees it through `TurnTools`,
which binds the turn's frozen `ToolContext` to every call.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING, Any

from agent import failures
from agent.cleantext import clean_text, clean_value
from agent.tools.base import Tool, ToolContext, ToolError
from agent.tools.hooks import HookBlocked, blocked_text

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

logger = logging.getLogger(__name__)


class ToolRegistry:
    """Holds the tools of the process and runs them by name.

    ``execute`` always returns text: every failure comes back as a string starting with
    ``"Error"`` so the model can read it and try again. Only ``asyncio.CancelledError``
    propagates, because a stopped turn must really stop.
    """

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self._validators: dict[str, Draft202012Validator] = {}
        self._definitions: list[dict[str, Any]] | None = None
        self._subsets: dict[frozenset[str], ToolRegistry] = {}
        self._extended: dict[tuple[Tool, ...], ToolRegistry] = {}

    def register(self, tool: Tool) -> None:
        """Add ``tool``, replacing any tool of the same name."""
        if not tool.name:
            raise ValueError(f"tool {tool!r} has no name")
        if tool.name in self._tools:
            logger.warning("replacing tool %r", tool.name)
        self._tools[tool.name] = tool
        self._validators.pop(tool.name, None)
        self._definitions = None
        self._subsets.clear()
        self._extended.clear()

    def unregister(self, name: str) -> None:
        """Remove the tool called ``name``; unknown names are ignored."""
        self._tools.pop(name, None)
        self._validators.pop(name, None)
        self._definitions = None
        self._subsets.clear()
        self._extended.clear()

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def has(self, name: str) -> bool:
        return name in self._tools

    def parallel_safe(self, name: str) -> bool:
        """Whether a call of ``name`` may run beside the other calls of its answer."""
        tool = self._tools.get(name)
        return tool is not None and tool.parallel_safe

    def names(self) -> list[str]:
        return list(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def definitions(self) -> list[dict[str, Any]]:
        """OpenAI function-tool dicts for every registered tool, in registration order."""
        if self._definitions is None:
            self._definitions = [tool.definition() for tool in self._tools.values()]
        # A fresh list so callers can't mutate the cache's ordering.
        return list(self._definitions)

    def _validator(self, tool: Tool) -> Draft202012Validator:
        validator = self._validators.get(tool.name)
        if validator is None:
            validator = self._validators[tool.name] = _validator_for(tool.parameters)
        return validator

    def without(self, names: frozenset[str]) -> ToolRegistry:
        """The same tools but `names`: the registry of a turn that may not use those (a
        sub-agent's). Made once per set of names."""
        if not names & self._tools.keys():
            return self
        subset = self._subsets.get(names)
        if subset is None:
            subset = self._subsets[names] = ToolRegistry()
            for tool in self._tools.values():
                if tool.name not in names:
                    subset._tools[tool.name] = tool
        return subset

    def with_tools(self, tools: tuple[Tool, ...]) -> ToolRegistry:
        """These tools and then `tools` (the MCP servers' tools of the moment), none of them
        replacing one of these. Made once per distinct tuple: a turn whose servers offer
        what they offered before pays nothing."""
        if not tools:
            return self
        extended = self._extended.get(tools)
        if extended is None:
            if len(self._extended) >= 8:  # servers come and go; old sets are never needed
                self._extended.clear()
            extended = self._extended[tools] = ToolRegistry()
            extended._tools = dict(self._tools)
            for tool in tools:
                if tool.name in extended._tools:
                    logger.warning("tool %r is offered twice; the first one is kept", tool.name)
                else:
                    extended._tools[tool.name] = tool
        return extended

    def for_turn(self, ctx: ToolContext) -> TurnTools:
        """The registry as the turn of ``ctx`` sees it."""
        return TurnTools(self, ctx)

    async def execute(
        self, name: str, arguments: dict[str, Any] | str | None, ctx: ToolContext | None = None
    ) -> str:
        """Run tool ``name`` with ``arguments`` (a dict or a JSON object string) in the turn
        of ``ctx``; without one, outside any turn. What comes back is clean text
        (`agent.cleantext`): every tool's result enters the turn here, whatever the tool read
        (a command's output, a web page, an MCP server's answer, a hook's replacement)."""
        return clean_text(await self._execute(name, arguments, ctx))

    async def _execute(
        self, name: str, arguments: dict[str, Any] | str | None, ctx: ToolContext | None
    ) -> str:
        tool = self._tools.get(name)
        if tool is None:
            available = ", ".join(sorted(self._tools)) or "(none)"
            return f"Error: unknown tool '{name}'. Available tools: {available}"

        args, problem = _parse_arguments(arguments)
        if problem is not None:
            return f"Error: arguments for '{name}' are not valid JSON: {problem}"
        # The model's arguments come cleaned from the model's client; these are whatever a
        # caller passed, and a NUL or a lone surrogate is refused by the system calls and
        # encoders the tools use.
        try:
            args = clean_value(args)
        except RecursionError:
            return f"Error: arguments for '{name}' are nested too deeply; send a flatter object."
        invalid = self._invalid(tool, args)
        if invalid is not None:
            return invalid

        ctx = ctx or ToolContext.detached()
        hooks = ctx.hooks
        if hooks is None or not hooks.watches(name):
            return await self._run(tool, args, ctx)
        # The operator's hooks see calls the schema allows, and what they pass on must be
        # allowed too.
        try:
            hooked = clean_value(await hooks.before_tool(name, args))
        except HookBlocked as exc:
            return blocked_text(str(exc))
        except RecursionError:
            return f"Error: arguments for '{name}' are nested too deeply (as a hook rewrote them)."
        if hooked is not args:
            invalid = self._invalid(tool, hooked, "as a hook rewrote them")
            if invalid is not None:
                return invalid
        return await hooks.after_tool(name, hooked, await self._run(tool, hooked, ctx))

    def _invalid(self, tool: Tool, args: dict[str, Any], how: str = "") -> str | None:
        """Why `args` do not fit `tool`'s schema, as the model reads it; None when they do."""
        from jsonschema.exceptions import SchemaError, best_match

        name = tool.name
        try:
            validator = self._validator(tool)
        except SchemaError as exc:
            logger.error("tool %r has an invalid parameters schema: %s", name, exc.message)
            return f"Error: tool '{name}' has an invalid parameters schema: {exc.message}"

        error = best_match(validator.iter_errors(args))
        if error is None:
            return None
        where = "/".join(str(part) for part in error.absolute_path) or "<root>"
        how = f" ({how})" if how else ""
        return f"Error: invalid arguments for '{name}'{how}: {where}: {error.message}"

    async def _run(self, tool: Tool, args: dict[str, Any], ctx: ToolContext) -> str:
        name = tool.name
        limit = asyncio.timeout(tool.time_limit)
        try:
            async with limit:
                result = await tool.execute(ctx, **args)
        except asyncio.CancelledError:
            raise
        except TimeoutError:
            if not limit.expired():
                ref = failures.log_failure(logger, "tool %r failed", name)
                return f"Error: {name} failed unexpectedly (reference {ref}); try another way."
            logger.warning("tool %r took longer than %g s and was stopped", name, tool.time_limit)
            return (
                f"Error: {name} took longer than {tool.time_limit:g} seconds and was stopped; "
                "try a smaller step."
            )
        except ToolError as exc:
            return _error_text(str(exc))
        except OSError as exc:
            # The system's reason is the model's to act on; the file name may be a path of
            # the server's, outside the workspace, and stays in the log.
            logger.warning("tool %r: %s", name, exc)
            return f"Error: {name} failed: {exc.strerror or type(exc).__name__}"
        except Exception:
            ref = failures.log_failure(logger, "tool %r failed", name)
            return f"Error: {name} failed unexpectedly (reference {ref}); try another way."

        if not isinstance(result, str):
            result = "" if result is None else str(result)
        return result


class TurnTools:
    """One turn's view of the registry: the same tools, each call made in the turn's
    context. Made per turn and cheap; the registry's caches are shared."""

    def __init__(self, registry: ToolRegistry, ctx: ToolContext) -> None:
        self.registry = registry
        self.ctx = ctx

    def names(self) -> list[str]:
        return self.registry.names()

    def definitions(self) -> list[dict[str, Any]]:
        return self.registry.definitions()

    def parallel_safe(self, name: str) -> bool:
        return self.registry.parallel_safe(name)

    async def execute(self, name: str, arguments: dict[str, Any] | str | None) -> str:
        return await self.registry.execute(name, arguments, self.ctx)


def _parse_arguments(arguments: dict[str, Any] | str | None) -> tuple[dict[str, Any], str | None]:
    """Return ``(args, None)`` or ``({}, reason)`` when arguments aren't a JSON object."""
    if arguments is None:
        return {}, None
    if isinstance(arguments, dict):
        return arguments, None
    if isinstance(arguments, str):
        # Models often send "" for a tool without parameters.
        if not arguments.strip():
            return {}, None
        try:
            parsed = json.loads(arguments)
        except json.JSONDecodeError as exc:
            return {}, str(exc)
        except RecursionError:
            return {}, "nested deeper than any tool's arguments go"
        if not isinstance(parsed, dict):
            return {}, f"expected a JSON object, got {type(parsed).__name__}"
        return parsed, None
    return {}, f"expected a JSON object, got {type(arguments).__name__}"


def _error_text(message: str) -> str:
    return message if message.startswith("Error") else f"Error: {message}"


# Checking a schema costs milliseconds and tests build many registries: a validator is made
# once per distinct schema and process.
_validators: dict[str, Draft202012Validator] = {}


def _validator_for(schema: dict[str, Any]) -> Draft202012Validator:
    key = json.dumps(schema, sort_keys=True, default=str)
    validator = _validators.get(key)
    if validator is None:
        # jsonschema takes longer to import than a short command-line turn takes to start:
        # it loads with the first tool call, not with the registry.
        from jsonschema import Draft202012Validator

        Draft202012Validator.check_schema(schema)
        validator = _validators[key] = Draft202012Validator(schema)
    return validator


def load_tools(paths: Iterable[str], *, taken: Collection[str]) -> tuple[list[Tool], list[str]]:
    """The tools that dotted `paths` name (`AGENT_TOOLS`: a `Tool` subclass made without
    arguments, a `Tool`, or a function that returns one), and one line for each path that
    gives none: it cannot be imported, is not a tool, raised when made, or is named as a
    tool of `taken` (the built-in ones) or an earlier path's tool is."""
    tools: list[Tool] = []
    problems: list[str] = []
    owners = dict.fromkeys(taken, "")
    for path in paths:
        try:
            tool = _load_tool(path)
        except _NotATool as exc:
            problems.append(f"AGENT_TOOLS: {path!r} {exc}")
            continue
        owner = owners.get(tool.name)
        if owner is not None:
            taken_by = f"{owner!r} gives one of that name" if owner else "a built-in tool's name"
            problems.append(f"AGENT_TOOLS: {path!r} gives a tool named {tool.name!r}: {taken_by}")
            continue
        owners[tool.name] = path
        tools.append(tool)
    return tools, problems


class _NotATool(Exception):
    """Why a dotted path gives no tool, as the rest of a sentence that starts with it."""


def _load_tool(path: str) -> Tool:
    module_name, _, attribute = path.strip().rpartition(".")
    if not module_name or not attribute:
        raise _NotATool("cannot be imported: it is not a dotted path (package.module.Name)")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise _NotATool(f"cannot be imported: {_one_line(exc)}") from exc
    except Exception as exc:  # the module itself fails: a syntax error, a bad import in it
        raise _NotATool(f"cannot be imported: {type(exc).__name__}: {_one_line(exc)}") from exc
    try:
        target = getattr(module, attribute)
    except AttributeError as exc:
        raise _NotATool(f"cannot be imported: {module_name} has no {attribute!r}") from exc
    tool = target
    if callable(target) and not isinstance(target, Tool):
        try:
            tool = target()
        except Exception as exc:
            raise _NotATool(f"raised {type(exc).__name__} when made: {_one_line(exc)}") from exc
    if not isinstance(tool, Tool):
        raise _NotATool(
            f"is not a Tool but {type(tool).__name__!r}: name a Tool subclass, a Tool, or a "
            "function that returns one"
        )
    if not tool.name:
        raise _NotATool("gives a tool without a name")
    return tool


def _one_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"
