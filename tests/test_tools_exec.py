"""The exec tool: output, exit codes, timeouts and cancellation killing the whole group."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from agent.tools import ToolContext, ToolError, ToolRegistry, Workspace, build_registry
from agent.tools.shell import ExecTool


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    return root


@pytest.fixture
def tools(ws: Path) -> ToolRegistry:
    return build_registry(workspace=ws, exec_timeout=1)


def host_processes(marker: str, *, whole: bool = False) -> list[int]:
    """Live processes on the host whose command line contains `marker` (or, `whole`, starts
    with it: the command itself rather than a shell or bwrap naming it in its arguments).

    Tests look from the host: a pid written inside the sandbox belongs to its own PID
    namespace and means nothing out here.
    """
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        found_here = cmdline.startswith(marker) if whole else marker in cmdline
        if found_here and state not in {"Z", "X"}:
            found.append(int(entry.name))
    return found


# This process's own: the suite may run twice at once on one host (CI's two passes), and a
# sleeper that the other started must not count here.
TAG = str(os.getpid())


def sleeper(seconds: int) -> str:
    """A sleep command that only this process's tests run: `seconds`.TAG seconds."""
    return f"sleep {seconds}.{TAG}"


async def wait_gone(marker: str, within: float = 3.0) -> bool:
    deadline = time.monotonic() + within
    while host_processes(marker):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def wait_running(marker: str, within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not host_processes(marker):
        assert time.monotonic() < deadline, f"{marker} never started"
        await asyncio.sleep(0.02)


@pytest.fixture(params=["sandboxed", "unfenced"])
def fenced_or_not(request: pytest.FixtureRequest, ws: Path) -> ToolRegistry:
    """Both ways `exec` runs commands; each must leave no process behind."""
    return build_registry(
        workspace=ws, restrict_to_workspace=request.param == "sandboxed", exec_timeout=1
    )


async def test_stdout_stderr_and_exit_code(tools: ToolRegistry) -> None:
    result = await tools.execute("exec", {"command": "echo out; echo err >&2; exit 3"})
    assert result == "out\nSTDERR:\nerr\nExit code: 3"


async def test_no_output(tools: ToolRegistry) -> None:
    assert await tools.execute("exec", {"command": "true"}) == "(no output)\nExit code: 0"


async def test_runs_in_the_workspace_and_stdin_is_empty(tools: ToolRegistry, ws: Path) -> None:
    real_ws = str(Workspace(ws).root)
    result = await tools.execute("exec", {"command": "pwd; cat; echo done"})
    assert result.splitlines()[0] == real_ws
    assert "done" in result
    assert result.endswith("Exit code: 0")


async def test_working_dir(tools: ToolRegistry, ws: Path) -> None:
    result = await tools.execute("exec", {"command": "pwd", "working_dir": "sub"})
    assert result.splitlines()[0] == str((ws / "sub").resolve())
    missing = await tools.execute("exec", {"command": "pwd", "working_dir": "nope"})
    assert missing == "Error: working directory not found: nope"


async def test_working_dir_is_fenced(tools: ToolRegistry, ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws / "out").symlink_to(outside, target_is_directory=True)
    for working_dir in ("..", "../outside", str(outside), "out", "/"):
        result = await tools.execute("exec", {"command": "pwd", "working_dir": working_dir})
        assert result.startswith("Error"), working_dir
        assert "outside the workspace" in result


async def test_working_dir_unfenced(ws: Path, tmp_path: Path) -> None:
    tools = build_registry(workspace=ws, restrict_to_workspace=False, exec_timeout=1)
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws / "out").symlink_to(outside, target_is_directory=True)
    for working_dir in ("../outside", str(outside), "out"):
        result = await tools.execute("exec", {"command": "pwd", "working_dir": working_dir})
        assert result.splitlines()[0] == str(outside.resolve())


async def test_timeout_kills_every_process(fenced_or_not: ToolRegistry) -> None:
    started = time.monotonic()
    result = await fenced_or_not.execute(
        "exec",
        {"command": f"echo before; {sleeper(3011)} & {sleeper(3012)} & wait", "timeout": 1},
    )
    assert time.monotonic() - started < 5
    assert result.startswith("Error: command timed out after 1 seconds (killed)")
    assert "before" in result
    for survivor in (sleeper(3011), sleeper(3012)):
        assert await wait_gone(survivor), f"{survivor} survived the timeout"


async def test_cancellation_kills_every_process(fenced_or_not: ToolRegistry) -> None:
    task = asyncio.create_task(
        fenced_or_not.execute("exec", {"command": f"{sleeper(3021)} & {sleeper(3022)} & wait"})
    )
    await wait_running(sleeper(3022))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for survivor in (sleeper(3021), sleeper(3022)):
        assert await wait_gone(survivor), f"{survivor} survived the cancellation"


async def test_timeout_is_clamped_to_the_configured_maximum(ws: Path) -> None:
    tool = ExecTool(Workspace(ws), timeout=1)
    started = time.monotonic()
    result = await tool.execute(ToolContext.detached(), command="sleep 30", timeout=1000)
    assert result.startswith("Error: command timed out after 1 seconds")
    assert time.monotonic() - started < 5


async def test_output_is_capped_in_the_middle(ws: Path) -> None:
    tool = ExecTool(Workspace(ws), timeout=5, output_limit=1000)
    result = await tool.execute(
        ToolContext.detached(),
        command="echo START; head -c 200000 /dev/zero | tr '\\0' x; echo; echo END",
    )
    assert result.startswith("START")
    assert result.endswith("END\nExit code: 0")
    assert "cut from the middle" in result
    assert len(result) < 2000


async def test_stderr_is_capped_too(ws: Path) -> None:
    tool = ExecTool(Workspace(ws), timeout=5, output_limit=1000)
    result = await tool.execute(
        ToolContext.detached(), command="head -c 100000 /dev/zero | tr '\\0' e >&2"
    )
    assert result.startswith("STDERR:\neee")
    assert "cut from the middle" in result
    assert len(result) < 2000


@pytest.mark.parametrize(
    "command", ["rm -rf /", "sudo reboot", ":(){ :|:& };:", "dd if=/dev/zero of=/dev/sda"]
)
async def test_deny_policy_refuses(tools: ToolRegistry, command: str) -> None:
    result = await tools.execute("exec", {"command": command})
    assert result.startswith("Error: command refused by the safety policy: ")


@pytest.mark.parametrize("command", ["echo shutdownlog", "echo reboot > notes.txt; cat notes.txt"])
async def test_deny_policy_lets_lookalikes_run(tools: ToolRegistry, command: str) -> None:
    result = await tools.execute("exec", {"command": command})
    assert result.endswith("Exit code: 0"), result


async def test_empty_command(tools: ToolRegistry) -> None:
    assert (await tools.execute("exec", {"command": "  "})).startswith("Error")


async def test_a_command_holding_a_nul_is_answered_plainly(fenced_or_not: ToolRegistry) -> None:
    # Through the registry the NUL is U+FFFD by the time the tool sees it (agent.cleantext):
    # the command runs as written, the character in place of what no shell takes.
    result = await fenced_or_not.execute("exec", {"command": "printf 'a\x00b' > made.txt"})
    assert result.endswith("Exit code: 0"), result
    # Called past the registry, the tool itself refuses it in a sentence.
    tool = fenced_or_not.get("exec")
    assert tool is not None
    with pytest.raises(ToolError, match="the command holds a NUL character"):
        await tool.execute(ToolContext.detached(), command="echo a\x00b")


async def test_unfenced_commands_get_the_env_they_are_given(ws: Path) -> None:
    workspace = Workspace(ws, restrict=False)
    tool = ExecTool(workspace, timeout=5, env={"PATH": os.defpath, "ONLY_THIS": "yes"})
    result = await tool.execute(
        ToolContext.detached(), command="echo $ONLY_THIS; echo ${HOME:-unset}"
    )
    assert result == "yes\nunset\nExit code: 0"


async def test_workspace_is_created_when_missing(tmp_path: Path) -> None:
    tool = ExecTool(Workspace(tmp_path / "fresh"), timeout=5)
    assert (await tool.execute(ToolContext.detached(), command="pwd")).endswith("Exit code: 0")
    assert (tmp_path / "fresh").is_dir()


@pytest.mark.parametrize("yields", [0, 1, 2, 3])
async def test_cancel_while_the_process_starts_does_not_wait_for_it(
    tmp_path: Path, yields: int
) -> None:
    tool = ExecTool(Workspace(tmp_path), timeout=30)
    task = asyncio.create_task(tool.execute(ToolContext.detached(), command="sleep 30"))
    for _ in range(yields):  # land the cancel at different points of the start-up
        await asyncio.sleep(0)
    task.cancel()
    started = time.monotonic()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 10)
    assert time.monotonic() - started < 3
