"""The operator's hooks as configured: the commands of the hooks file (`AGENT_HOOKS_FILE`) and
the Python functions `AGENT_HOOKS` names, each checked, with one line per problem.

An entry of the file is `{"command": …, "match"?: glob, "timeout"?: seconds, "on_error"?:
"block" | "allow"}`; `match` is for tool events only, `on_error` (what a hook that cannot
answer does to the call, `agent.tools.hooks`) for before_tool only.

The file is read again only when it changes (its modification time or size), so a turn
pays one `stat` for it; the functions are imported once per process.
"""

from __future__ import annotations

import importlib
import json
import logging
import shlex
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

TOOL_EVENTS = ("before_tool", "after_tool")
TURN_EVENTS = ("turn_start", "turn_end")
EVENTS = (*TOOL_EVENTS, *TURN_EVENTS)
DEFAULT_TIMEOUT = 10.0
# What a before_tool hook that cannot answer does to the call: blocks it (the default: a
# guard that fails open is no guard), or lets it pass.
ON_ERROR = ("block", "allow")
_KEYS = {"match", "command", "timeout", "on_error"}

HookFunction = Callable[[dict[str, Any]], Any]


@dataclass(frozen=True, slots=True)
class CommandHook:
    """One command of the hooks file: run for `event` (and, for a tool event, the tools
    whose name `match` matches as a glob) with `argv`, from the file's folder."""

    event: str
    argv: tuple[str, ...]
    match: str
    timeout: float
    cwd: Path
    label: str  # where the file declares it, for the log: "before_tool[0]"
    # A before_tool hook's, when it cannot run or answer: "block" the call or "allow" it.
    on_error: str = "block"


@dataclass(frozen=True, slots=True)
class FunctionHook:
    """One `AGENT_HOOKS` entry: a function called with every event."""

    path: str
    function: HookFunction


@dataclass(frozen=True, slots=True)
class HookSet:
    commands: tuple[CommandHook, ...] = ()
    functions: tuple[FunctionHook, ...] = ()
    # Why the operator's hooks cannot be known (a hooks file edited into an error while the
    # site runs, a function that no longer imports): then no tool call is let through.
    broken: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.commands or self.functions or self.broken)


@dataclass(frozen=True, slots=True)
class _Read:
    stamp: tuple[int, int]  # modification time (ns) and size
    commands: tuple[CommandHook, ...]
    problems: tuple[str, ...]


_lock = threading.Lock()
_files: dict[Path, _Read] = {}
_functions: dict[tuple[str, ...], tuple[tuple[FunctionHook, ...], tuple[str, ...]]] = {}


def load_hooks(
    path: Path, functions: Iterable[str], *, required: bool
) -> tuple[HookSet, list[str]]:
    """The hooks of the file at `path` and of the dotted `functions`, and one line for each
    problem. A file with any problem gives no commands (half a policy is no policy); a
    missing file is no hooks, unless it is `required` (named on purpose)."""
    commands, file_problems = read_hooks_file(path, required=required)
    hooks, function_problems = load_functions(functions)
    return HookSet(commands, hooks), [*file_problems, *function_problems]


def read_hooks_file(path: Path, *, required: bool) -> tuple[tuple[CommandHook, ...], list[str]]:
    try:
        found = path.stat()
    except FileNotFoundError:
        return (), [f"AGENT_HOOKS_FILE: {path} does not exist"] if required else []
    except OSError as exc:
        return (), [f"AGENT_HOOKS_FILE: {path} cannot be read: {exc.strerror}"]
    stamp = (found.st_mtime_ns, found.st_size)
    with _lock:
        known = _files.get(path)
    if known is None or known.stamp != stamp:
        known = _Read(stamp, *_parse_file(path))
        with _lock:
            _files[path] = known
    return known.commands, list(known.problems)


def _parse_file(path: Path) -> tuple[tuple[CommandHook, ...], tuple[str, ...]]:
    where = f"AGENT_HOOKS_FILE: {path}"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        return (), (f"{where} cannot be read: {exc.strerror}",)
    except UnicodeDecodeError:
        return (), (f"{where} is not UTF-8 text",)
    except json.JSONDecodeError as exc:
        return (), (f"{where} is not valid JSON: {exc.msg} (line {exc.lineno})",)
    if not isinstance(data, dict):
        return (), (f"{where} must hold a JSON object of events, not {_kind(data)}",)
    commands: list[CommandHook] = []
    problems: list[str] = []
    for event, entries in data.items():
        if event not in EVENTS:
            problems.append(f"{where}: unknown event {event!r} (use {', '.join(EVENTS)})")
            continue
        if not isinstance(entries, list):
            problems.append(f"{where}: {event} must be a list of hooks, not {_kind(entries)}")
            continue
        for index, entry in enumerate(entries):
            label = f"{event}[{index}]"
            try:
                commands.append(_command(entry, event, label, path.parent))
            except ValueError as exc:
                problems.append(f"{where}: {label}: {exc}")
    if problems:
        return (), tuple(problems)
    return tuple(commands), ()


def _command(entry: Any, event: str, label: str, cwd: Path) -> CommandHook:
    if not isinstance(entry, dict):
        raise ValueError(f"must be an object with a command, not {_kind(entry)}")
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r} (use match, command, timeout, on_error)")
    match = entry.get("match", "*")
    if event in TURN_EVENTS and "match" in entry:
        raise ValueError("match is for before_tool and after_tool; a turn has no tool")
    if not isinstance(match, str) or not match:
        raise ValueError("match must be a tool name or a glob such as mcp_*")
    timeout = entry.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise ValueError(f"timeout must be a number of seconds above 0, not {timeout!r}")
    on_error = entry.get("on_error", "block")
    if "on_error" in entry and event != "before_tool":
        raise ValueError(
            "on_error is for before_tool: other hooks that fail are logged and never block"
        )
    if on_error not in ON_ERROR:
        raise ValueError(f'on_error must be "block" or "allow", not {on_error!r}')
    argv = _argv(entry.get("command"))
    return CommandHook(event, argv, match, float(timeout), cwd, label, on_error)


def _argv(command: Any) -> tuple[str, ...]:
    if command is None:
        raise ValueError("command is missing")
    if isinstance(command, str):
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            raise ValueError(f"command cannot be split into words: {exc}") from None
    elif isinstance(command, list) and all(isinstance(word, str) for word in command):
        argv = list(command)
    else:
        raise ValueError(f"command must be a string or a list of strings, not {_kind(command)}")
    if not argv or not argv[0]:
        raise ValueError("command is empty")
    return tuple(argv)


def load_functions(paths: Iterable[str]) -> tuple[tuple[FunctionHook, ...], list[str]]:
    """The functions `paths` name (`package.module:function`), each imported once per
    process, and one line for each that gives none."""
    key = tuple(path.strip() for path in paths if path.strip())
    if not key:
        return (), []
    with _lock:
        known = _functions.get(key)
    if known is None:
        hooks: list[FunctionHook] = []
        problems: list[str] = []
        for path in key:
            try:
                hooks.append(FunctionHook(path, _import(path)))
            except _NotAHook as exc:
                problems.append(f"AGENT_HOOKS: {path!r} {exc}")
        known = (tuple(hooks), tuple(problems))
        with _lock:
            _functions[key] = known
    return known[0], list(known[1])


class _NotAHook(Exception):
    """Why a dotted path gives no function, as the rest of a sentence that starts with it."""


def _import(path: str) -> HookFunction:
    module_name, colon, attribute = path.partition(":")
    if not colon:  # package.module.function, as AGENT_TOOLS spells its entries
        module_name, _, attribute = path.rpartition(".")
    if not module_name or not attribute:
        raise _NotAHook("cannot be imported: it is not package.module:function")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise _NotAHook(f"cannot be imported: {_one_line(exc)}") from exc
    except Exception as exc:  # the module itself fails: a syntax error, a bad import in it
        raise _NotAHook(f"cannot be imported: {type(exc).__name__}: {_one_line(exc)}") from exc
    target: Any = module
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise _NotAHook(f"cannot be imported: {module_name} has no {attribute!r}") from None
    if not callable(target):
        raise _NotAHook(f"is not callable but {type(target).__name__!r}")
    return target  # type: ignore[no-any-return]


_KINDS: dict[type, str] = {dict: "an object", list: "a list", str: "a string"}


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return _KINDS.get(type(value), type(value).__name__)


def _one_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"
