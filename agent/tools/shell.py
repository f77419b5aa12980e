"""The ``exec`` tool: run a shell command in the workspace with a deny policy, a timeout
that kills every process it started, and capped output.

With the workspace restriction on (the default), commands run in the bubblewrap sandbox
of `agent.tools.sandbox`, and `exec` refuses to run at all where there is none (or, when
commands may use the network, where the sandbox cannot have a network of its own). With it
off, they run on the host as the server's user, without its secrets in their environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from agent.tools.base import Tool, ToolContext, ToolError
from agent.tools.guards import AddressGuard, Workspace, cap_output, check_command, cut_note
from agent.tools.guards.folders import hand_over
from agent.tools.sandbox import (
    INSTALL_HINT,
    Launch,
    Limits,
    Sandbox,
    SandboxUnavailable,
    find_sandbox,
    network_problem,
    out_of_reach,
)
from agent.tools.sandbox_net import HELPER_HINT, NetworkSetupFailed, last_line

logger = logging.getLogger(__name__)

DEFAULT_OUTPUT_LIMIT = 20_000  # characters kept: half from the start, half from the end
_READ_CHUNK = 65536
# After SIGKILL the pipes close at once; this only bounds the wait for the event loop.
_REAP_TIMEOUT = 5.0


class _HeadTail:
    """Keeps the first and last ``keep`` bytes of a stream so memory stays bounded."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.keep - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.keep:
                del self.tail[: len(self.tail) - self.keep]

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        dropped = self.total - len(self.head) - len(self.tail)
        if dropped > 0:
            return head + cut_note(dropped, "bytes") + tail
        return head + tail


async def _pump(stream: asyncio.StreamReader | None, sink: _HeadTail) -> None:
    if stream is None:
        return
    while chunk := await stream.read(_READ_CHUNK):
        sink.feed(chunk)


def _kill_group(pid: int) -> None:
    # start_new_session=True made the process (the shell, or bwrap with the sandbox's init
    # beside it) a session and group leader, so its pid is the group id and the group
    # outlives it as long as any member is alive. A sandbox's other processes die with
    # its PID namespace once its init is gone.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def _reap(proc: asyncio.subprocess.Process) -> None:
    """Wait a moment for a killed process, so that its transport closes with it rather than
    when the collector finds it, possibly after its event loop is gone."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(proc.wait()), _REAP_TIMEOUT)


# Launches whose release runs in a thread; kept referenced until it is done.
_releasing: set[asyncio.Future[None]] = set()


def _release_later(launch: Launch) -> None:
    release = asyncio.ensure_future(asyncio.to_thread(launch.close))
    _releasing.add(release)
    release.add_done_callback(_releasing.discard)


def _signal_note(code: int) -> str:
    if code >= 0:
        return ""
    try:
        name = signal.Signals(-code).name
    except ValueError:
        return ""
    if name == "SIGKILL":
        return " (killed: out of memory or over a limit)"
    return f" (killed by {name})"


async def _last_words(proc: asyncio.subprocess.Process) -> str:
    """The last line a killed sandbox wrote to its standard error (bwrap's own complaint)."""
    err = b""
    with contextlib.suppress(TimeoutError):
        _, err = await asyncio.wait_for(proc.communicate(), _REAP_TIMEOUT)
    return last_line(err)


async def _attach(proc: asyncio.subprocess.Process, attach: Callable[[], None]) -> str | None:
    """Run `attach` (the sandbox's network set-up) while bwrap holds the command; what went
    wrong, if anything. On any failure the sandbox is killed before its hold can end."""
    try:
        await asyncio.to_thread(attach)
    except NetworkSetupFailed as exc:
        logger.error("could not set up a sandbox's network: %s", exc)
        _kill_group(proc.pid)
        return str(exc)
    except BaseException:
        _kill_group(proc.pid)
        await _reap(proc)
        raise
    return None


class ExecTool(Tool):
    name = "exec"
    time_limit = None  # each command has its own timeout, and its processes die with it
    description = (
        "Run a shell command in the workspace and return its stdout, stderr and exit code. "
        "stdin is empty; the command is killed (with all its child processes) on timeout, "
        "and background processes end with it. Long output is cut in the middle."
    )

    def __init__(
        self,
        workspace: Workspace,
        *,
        timeout: int = 60,
        max_timeout: int | None = None,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
        env: Mapping[str, str] | None = None,
        limits: Limits | None = None,
        allow_private: bool = False,
        address_guard: AddressGuard | None = None,
    ) -> None:
        self.workspace = workspace
        # URLs in commands get the web tools' check, so that `curl` is no way around it.
        self.address_guard = address_guard or AddressGuard(
            allow_private=allow_private, resolve_timeout=5.0
        )
        self.timeout = timeout
        self.max_timeout = max_timeout if max_timeout is not None else timeout
        self.output_limit = output_limit
        # The environment commands start from (the sandbox keeps only its locale of it).
        # None inherits the server's; callers that hold secrets there pass a scrubbed one.
        self.env = dict(env) if env is not None else None
        self.limits = limits or Limits()
        if not workspace.restrict:
            self.description += " Commands run on the host, outside any sandbox."
        elif self.limits.network:
            self.description += (
                " Commands run in a sandbox that reaches the internet, but not this server, "
                "its services or its private network."
            )
        else:
            self.description += " Commands run in a sandbox without network access."
        self.parameters = {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The shell command to run."},
                "working_dir": {
                    "type": "string",
                    "description": "Directory to run in, relative to the workspace "
                    "(default: the workspace root).",
                },
                "timeout": {
                    "type": "integer",
                    "minimum": 1,
                    "description": f"Seconds before the command is killed (default "
                    f"{self.timeout}, at most {self.max_timeout}).",
                },
            },
            "required": ["command"],
            "additionalProperties": False,
        }

    async def execute(self, ctx: ToolContext, /, **kwargs: Any) -> str:
        try:
            return await self._execute(ctx, **kwargs)
        finally:
            if ctx.wrote is not None:
                # A command may write any file of the folder, the heartbeat's too; heard of
                # even when the call was cut short (its time ran out, the turn stopped).
                await asyncio.shield(ctx.wrote(None))

    async def _execute(self, ctx: ToolContext, /, **kwargs: Any) -> str:
        command: str = kwargs["command"]
        if not command.strip():
            raise ToolError("command must not be empty")
        if "\x00" in command:
            raise ToolError(
                "the command holds a NUL character, which no shell command can; "
                "remove it (to write one, use printf '\\0')"
            )
        reason = check_command(command)
        if reason:
            logger.warning("exec refused %r: %s", command, reason)
            return f"Error: command refused by the safety policy: {reason}"
        await self.address_guard.check_command_urls(command)
        # The turn's user's folder, the only one of the host that the sandbox can write.
        fence = ctx.workspace or self.workspace
        cwd = self._working_dir(fence, kwargs.get("working_dir"))
        requested = kwargs.get("timeout") or self.timeout
        timeout = max(1, min(int(requested), self.max_timeout))
        if not fence.restrict:
            return await self._run(["/bin/sh", "-c", command], timeout, cwd=cwd, env=self.env)
        sandbox = await self._sandbox()
        await asyncio.to_thread(self._make_reachable, sandbox, fence.root)
        try:
            launch = sandbox.prepare(
                command,
                workspace=fence.root,
                cwd=cwd,
                cpu_seconds=timeout,
                limits=self.limits,
                env=self.env if self.env is not None else os.environ,
            )
        except OSError as exc:
            logger.error("could not set up the sandbox: %s", exc)
            raise ToolError(f"could not set up the sandbox for this command: {exc}") from None
        try:
            # bwrap itself (the sandbox's PID 1) gets nothing of the server's environment or
            # working directory: they are readable in the sandbox's /proc/1.
            return await self._run(
                launch.argv,
                timeout,
                env={"PATH": os.defpath},
                cwd=Path("/"),
                launch=launch,
            )
        finally:
            # Its cgroup can only go once the sandbox's last processes are reaped, a few
            # milliseconds after the command's own end: the answer need not wait for that.
            _release_later(launch)

    async def _sandbox(self) -> Sandbox:
        """The sandbox to run in; ToolError saying why when there is none (with network,
        none that can have a network of its own)."""
        uid = self.limits.host_uid
        try:
            sandbox = await asyncio.to_thread(find_sandbox, host_uid=uid)
        except SandboxUnavailable as exc:
            logger.warning("exec refused: no sandbox: %s", exc)
            raise ToolError(
                f"exec is disabled on this server: it has no sandbox to run commands in "
                f"({exc}). The file tools still work. An administrator can {INSTALL_HINT}, "
                "or turn AGENT_RESTRICT_TO_WORKSPACE off to run commands unfenced."
            ) from None
        problem = (
            await asyncio.to_thread(network_problem, host_uid=uid) if self.limits.network else None
        )
        if problem is not None:
            logger.warning("exec refused: no network for its sandbox: %s", problem)
            raise ToolError(
                f"exec is disabled on this server: commands may use the network here, but "
                f"their sandbox cannot have a network of its own ({problem}), and they never "
                "get the server's. The file tools still work. An administrator can "
                f"{HELPER_HINT}, or turn AGENT_EXEC_NETWORK off to run commands without network."
            )
        return sandbox

    def _make_reachable(self, sandbox: Sandbox, folder: Path) -> None:
        """As root, the folder the command works in becomes the sandbox account's (once, a
        folder made by the site or an older version), and must be one it can reach."""
        uid = sandbox.host_uid(self.limits)
        if uid is None:
            return
        blocked = out_of_reach(folder.parent, uid)
        if blocked is not None:
            raise ToolError(
                f"exec cannot run here: its sandbox runs as uid {uid}, which may not pass "
                f"through {blocked} to reach the workspace. An administrator can move "
                f"AGENT_WORKSPACE to a folder that others may pass through, or let them "
                f"pass (chmod o+x {blocked})."
            )
        try:
            hand_over(folder, uid)
        except OSError as exc:
            logger.error("could not hand %s to uid %d: %s", folder, uid, exc)
            raise ToolError(f"could not set up the sandbox for this command: {exc}") from None

    def _working_dir(self, fence: Workspace, working_dir: str | None) -> Path:
        if not working_dir:
            # A fresh workspace may not exist yet; the model expects to start in it.
            fence.root.mkdir(parents=True, exist_ok=True)
            return fence.root
        cwd = fence.resolve(working_dir)
        if not cwd.is_dir():
            raise ToolError(f"working directory not found: {working_dir}")
        return cwd

    async def _run(
        self,
        argv: list[str],
        seconds: int,
        *,
        env: Mapping[str, str] | None,
        cwd: Path | None = None,
        launch: Launch | None = None,
    ) -> str:
        keep = max(self.output_limit // 2, 1)
        stdout, stderr = _HeadTail(keep), _HeadTail(keep)
        starting = asyncio.ensure_future(
            asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=cwd,
                env=env,
                pass_fds=launch.pass_fds if launch is not None else (),
                start_new_session=True,
            )
        )
        try:
            proc = await asyncio.shield(starting)
        except asyncio.CancelledError:
            # Cancelled while the process starts, asyncio would kill the shell and then wait
            # for its pipes to close, i.e. for every child to finish on its own. Let the start
            # complete instead, then kill the whole group at once.
            proc = await starting
            _kill_group(proc.pid)
            await _reap(proc)
            raise
        finally:
            if launch is not None:
                launch.spawned()
        network = launch.network if launch is not None else None
        if network is not None:
            failure = await _attach(proc, network.attach)
            if failure is not None:
                said = await _last_words(proc)
                detail = f" ({said})" if said else ""
                return f"Error: could not set up the network of the sandbox: {failure}{detail}"

        async def communicate() -> int:
            await asyncio.gather(_pump(proc.stdout, stdout), _pump(proc.stderr, stderr))
            return await proc.wait()

        try:
            code = await asyncio.wait_for(communicate(), seconds)
        except TimeoutError:
            _kill_group(proc.pid)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), _REAP_TIMEOUT)
            output = self._format(stdout, stderr, None)
            head = f"Error: command timed out after {seconds} seconds (killed)"
            return f"{head}\n{output}" if output else head
        except asyncio.CancelledError:
            _kill_group(proc.pid)
            await _reap(proc)
            raise
        finally:
            # An unexpected error above must not leave a running process group behind.
            if proc.returncode is None:
                _kill_group(proc.pid)
        return self._format(stdout, stderr, code)

    def _format(self, stdout: _HeadTail, stderr: _HeadTail, code: int | None) -> str:
        parts: list[str] = []
        out, err = stdout.text(), stderr.text()
        if out:
            parts.append(out.rstrip("\n"))
        if err:
            parts.append("STDERR:\n" + err.rstrip("\n"))
        if code is not None:
            if not parts:
                parts.append("(no output)")
            parts.append(f"Exit code: {code}{_signal_note(code)}")
        return cap_output("\n".join(parts), self.output_limit + 200)
