"""Operator hooks: commands and Python functions that see a turn's tool calls (and may
change or block them) and its start and end.

A hook runs in the operator's trust, outside the agent's sandbox: a command of the hooks
file is the operator's own argv, started without a shell, in its own process group, from
the file's folder, with the event as one JSON object on standard input (clean UTF-8 that
always encodes: `agent.cleantext`); nothing of the model's reaches it but through that
object. It answers with its exit status and standard output:

- exit 0 lets the call pass; `{"arguments": {…}}` (before a tool) or `{"result": "…"}`
  (after it) printed on standard output replaces them;
- exit 2 blocks the tool: its standard error reaches the model as
  `Error: blocked by hook: …` (after a tool, that text replaces the result);
- a hook that cannot answer (a command that cannot start, a hook past its timeout, which
  is then killed with its children, another exit status, output that is not a JSON object,
  `arguments` that are not an object) is logged, and then:
  - before a tool, it blocks the call: the model reads `Error: blocked by hook: …` saying
    that the check could not run. A guard that fails open is no guard: a deny list whose
    hook crashes on some input would let exactly that input through. The operator may mark
    a hook `"on_error": "allow"` in the hooks file (its default is `"block"`) when the call
    should go on without it, such as an audit log that is nice to have;
  - after a tool and at a turn's start or end, where a hook watches and cannot stop what
    has happened, the call or turn goes on.

A Python function (`AGENT_HOOKS`) gets the same object and answers the same way: None
passes, a dict with `arguments`/`result` replaces, `HookBlocked(reason)` blocks. One that
raises anything else, runs past the timeout or returns something else has failed as a
command can: before a tool, that blocks the call. Functions have no per-hook options, so
they always fail closed there; a function that should never stop a call catches its own
errors and returns None.

Start-up refuses a hooks file with an error in it. One edited into an error while the site
runs blocks every tool call until it is mended (`agent.turn.toolbox.turn_hooks`): which of
its hooks were guards cannot be told, and each of them would be skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import fnmatch
import inspect
import json
import logging
import os
import signal
from typing import Any

from agent.cleantext import clean_value
from agent.tools.blocking import threads as tool_threads
from agent.tools.hook_config import (
    DEFAULT_TIMEOUT,
    TOOL_EVENTS,
    CommandHook,
    FunctionHook,
    HookSet,
)

logger = logging.getLogger(__name__)

BLOCK_EXIT = 2
BLOCKED_PREFIX = "Error: blocked by hook: "
_REASON_LIMIT = 2000
BROKEN_REASON = (
    "the operator's checks of tool calls cannot be read right now (their configuration has "
    "an error, which the server's log names), so no {tool} call is made until it is fixed"
)
_REAP_TIMEOUT = 2.0


class HookBlocked(Exception):
    """Raised by a hook function to block the tool call; its message reaches the model as
    `Error: blocked by hook: <message>`."""


class HookFailed(Exception):
    """A hook that could not run or answer. `why` says how in a few words that may reach
    the model (no paths, no output of the hook's); `detail` is for the log."""

    def __init__(self, why: str, detail: str = "") -> None:
        super().__init__(why)
        self.why = why
        self.detail = detail or why


def blocked_text(reason: str) -> str:
    return BLOCKED_PREFIX + reason


class TurnHooks:
    """The hooks as one turn calls them: every event they get names the turn's session,
    user, run and channel."""

    def __init__(
        self, hooks: HookSet, *, session: str, user: str | None, run_id: str, channel: str
    ) -> None:
        self.hooks = hooks
        self.turn = {"session": session, "user": user, "run_id": run_id, "channel": channel}
        self._watched: dict[str, bool] = {}

    def watches(self, tool: str) -> bool:
        """Whether any hook wants to see calls of `tool`: when none does, the call costs
        nothing more."""
        if self.hooks.broken:
            return True
        seen = self._watched.get(tool)
        if seen is None:
            seen = self._watched[tool] = bool(self.hooks.functions) or any(
                hook.event in TOOL_EVENTS and fnmatch.fnmatchcase(tool, hook.match)
                for hook in self.hooks.commands
            )
        return seen

    async def before_tool(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments to call `tool` with, after each hook in turn had its say; raises
        `HookBlocked` when one blocks the call, or when the hooks cannot be read."""
        if self.hooks.broken:
            raise HookBlocked(BROKEN_REASON.format(tool=tool))
        for hook in self._hooks("before_tool", tool):
            event = self._event("before_tool", tool=tool, arguments=arguments)
            try:
                answer = await _ask(hook, event)
                if answer is None or "arguments" not in answer:
                    continue
                if not isinstance(answer["arguments"], dict):
                    raise HookFailed("its arguments are not an object")
            except HookFailed as failure:
                if isinstance(hook, CommandHook) and hook.on_error == "allow":
                    _failed(hook, failure, "the call goes on (on_error is allow)")
                    continue
                _failed(hook, failure, "the call is blocked")
                raise HookBlocked(
                    f"the operator's check of {tool} calls could not run ({failure.why}), "
                    "so this call was not made"
                ) from None
            arguments = answer["arguments"]
        return arguments

    async def after_tool(self, tool: str, arguments: dict[str, Any], result: str) -> str:
        """The result the model gets of `tool`, after each hook in turn had its say; a
        hook that blocks replaces it with the reason."""
        for hook in self._hooks("after_tool", tool):
            event = self._event("after_tool", tool=tool, arguments=arguments, result=result)
            try:
                answer = await _ask(hook, event)
            except HookBlocked as exc:
                return blocked_text(str(exc))
            except HookFailed as failure:
                _failed(hook, failure, "the result goes on")
                continue
            if answer is None or "result" not in answer:
                continue
            if isinstance(answer["result"], str):
                result = answer["result"]
            else:
                _failed(hook, HookFailed("its result is not a string"), "the result goes on")
        return result

    async def turn_start(self, content: str) -> None:
        """Tell the hooks that the turn starts with the user's `content`."""
        await self._tell("turn_start", content=content)

    async def turn_end(self, **outcome: Any) -> None:
        """Tell the hooks how the turn ended (status, text, error, ...)."""
        await self._tell("turn_end", **outcome)

    async def _tell(self, name: str, **fields: Any) -> None:
        # A turn's hooks watch; they cannot stop a turn that is starting or has ended.
        for hook in self._hooks(name, None):
            try:
                await _ask(hook, self._event(name, **fields))
            except HookBlocked as exc:
                logger.info("%s hook %s blocked, which it cannot: %s", name, _name(hook), exc)
            except HookFailed as failure:
                _failed(hook, failure, "the turn goes on")

    def _hooks(self, event: str, tool: str | None) -> list[CommandHook | FunctionHook]:
        commands = [
            hook
            for hook in self.hooks.commands
            if hook.event == event and (tool is None or fnmatch.fnmatchcase(tool, hook.match))
        ]
        return [*commands, *self.hooks.functions]

    def _event(self, name: str, **fields: Any) -> dict[str, Any]:
        return {"event": name, **self.turn, **fields}


async def _ask(hook: CommandHook | FunctionHook, event: dict[str, Any]) -> dict[str, Any] | None:
    """What `hook` answered to `event`: None to let it pass, else the object it gave.
    Raises `HookBlocked` when it blocks, `HookFailed` when it could not run or answer, and
    nothing else but a cancellation."""
    try:
        if isinstance(hook, CommandHook):
            return await _ask_command(hook, event)
        return await _ask_function(hook, event)
    except (HookBlocked, HookFailed):
        raise
    except Exception as exc:
        if isinstance(hook, FunctionHook):
            logger.exception("hook %s raised", hook.path)
            raise HookFailed("it raised an error") from exc
        logger.exception("hook %s failed", _name(hook))
        raise HookFailed("it failed") from exc


async def _ask_function(hook: FunctionHook, event: dict[str, Any]) -> dict[str, Any] | None:
    # A copy: what the function changes in place does not count, what it returns does.
    event = copy.deepcopy(event)
    limit = asyncio.timeout(DEFAULT_TIMEOUT)
    try:
        async with limit:
            if inspect.iscoroutinefunction(hook.function):
                answer = await hook.function(event)
            else:
                # A plain function may block (a file, a request, the ORM): not on the loop,
                # nor in its shared pool, where one that never returns would keep a thread
                # the whole process needs; in threads of its own, a few at most for each
                # user, so that input of one user's that makes it hang holds up no one else.
                owner = ("hook", hook.path, event.get("user"))
                answer = await tool_threads.run(owner, hook.function, event)
                if inspect.isawaitable(answer):
                    answer = await answer
    except TimeoutError:
        if not limit.expired():
            raise  # its own, not ours
        raise HookFailed(f"it took over {DEFAULT_TIMEOUT:g} s") from None
    if answer is None or isinstance(answer, dict):
        return answer
    raise HookFailed(f"it returned {type(answer).__name__}, not a dict or None")


async def _ask_command(hook: CommandHook, event: dict[str, Any]) -> dict[str, Any] | None:
    # Cleaned, and encoded so that it cannot fail: a text the event cannot hold would
    # otherwise keep the hook from running at all.
    text = json.dumps(clean_value(event), ensure_ascii=False, default=str)
    data = text.encode(errors="replace")
    try:
        code, out, err = await _run(hook, data)
    except (OSError, ValueError) as exc:  # no such program, not executable, a NUL in it
        raise HookFailed("it could not start", f"it could not start: {exc}") from None
    if code is None:
        raise HookFailed(
            f"it took over {hook.timeout:g} s", f"it took over {hook.timeout:g} s and was killed"
        )
    if code == BLOCK_EXIT:
        reason = err.decode(errors="replace").strip()
        if len(reason) > _REASON_LIMIT:
            reason = reason[: _REASON_LIMIT - 1] + "…"
        raise HookBlocked(reason or f"{hook.event} hook {hook.label} gave no reason")
    if code != 0:
        said = err.decode(errors="replace").strip()[:_REASON_LIMIT]
        raise HookFailed(f"it exited with {code}", f"it exited with {code}: {said}")
    text = out.decode(errors="replace").strip()
    if not text:
        return None
    try:
        answer = json.loads(text)
    except (ValueError, RecursionError):
        raise HookFailed("its output is not JSON") from None
    if not isinstance(answer, dict):
        raise HookFailed("its output is not a JSON object")
    return answer


async def _run(hook: CommandHook, data: bytes) -> tuple[int | None, bytes, bytes]:
    """Run `hook` with `data` on its standard input: its exit status (None when it ran past
    its timeout and was killed), standard output and standard error."""
    starting = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            *hook.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=hook.cwd,
            # Its own group, so that a timeout or a stop kills whatever it started too.
            start_new_session=True,
        )
    )
    try:
        proc = await asyncio.shield(starting)
    except asyncio.CancelledError:
        proc = await starting
        await _kill(proc)
        raise
    try:
        out, err = await asyncio.wait_for(proc.communicate(data), hook.timeout)
    except TimeoutError:
        await _kill(proc)
        return None, b"", b""
    except asyncio.CancelledError:  # the turn stopped: the hook stops with it
        await _kill(proc)
        raise
    finally:
        if proc.returncode is None:
            _kill_group(proc.pid)
    assert proc.returncode is not None
    return proc.returncode, out, err


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def _kill(proc: asyncio.subprocess.Process) -> None:
    _kill_group(proc.pid)
    # Reaped now, so that its transport closes with it and not after its loop is gone.
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(proc.wait()), _REAP_TIMEOUT)


def _failed(hook: CommandHook | FunctionHook, failure: HookFailed, outcome: str) -> None:
    logger.warning("hook %s could not answer: %s; %s", _name(hook), failure.detail, outcome)


def _name(hook: CommandHook | FunctionHook) -> str:
    if isinstance(hook, FunctionHook):
        return hook.path
    return f"{hook.label} ({hook.argv[0]})"
