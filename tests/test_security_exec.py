"""Attacks on the host through `exec` and the file tools, tried as an ordinary user's agent
would: with the workspace restriction on, each one must stay refused."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

from agent.tools import Limits, ToolContext, ToolRegistry, build_registry
from agent.tools import sandbox as sandbox_module
from agent.tools.cgroups import find_parent
from agent.tools.guards import Workspace
from agent.tools.sandbox import sandbox_env
from agent.tools.shell import ExecTool
from tests.conftest import needs, skip_for_missing
from tests.test_tools_exec import host_processes, sleeper, wait_gone

SECRET = "sk-planted-secret-4f1d9"
ROOT = Path(__file__).resolve().parent.parent
SYSTEM_PYTHON = Path("/usr/bin/python3")


@pytest.fixture
def tools(workspace: Path) -> ToolRegistry:
    """What an ordinary user's agent gets: every secret of the server within reach of its
    environment, were it not scrubbed."""
    server_env = {**os.environ, "AGENT_API_KEY": SECRET, "DJANGO_SUPERUSER_PASSWORD": SECRET}
    return build_registry(
        workspace=workspace,
        exec_timeout=5,
        exec_env=server_env,
        exec_limits=Limits(max_processes=32, memory_mb=256),
    )


@pytest.fixture
def planted_secret(monkeypatch: pytest.MonkeyPatch) -> str:
    """A secret in this (the server's) process environment, as a real deployment has."""
    monkeypatch.setenv("AGENT_API_KEY", SECRET)
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", SECRET)
    return SECRET


OUTSIDE_A_TURN = ToolContext.detached()


async def run(tools: ToolRegistry, command: str, **arguments: object) -> str:
    return await tools.execute("exec", {"command": command, **arguments})


async def test_the_server_environment_cannot_be_read(tools: ToolRegistry, planted_secret: str):
    result = await run(
        tools,
        "env; cat /proc/$PPID/environ /proc/1/environ; "
        "for p in /proc/[0-9]*; do cat $p/environ; done; echo end",
    )
    assert "end" in result
    assert planted_secret not in result
    assert "DJANGO_SETTINGS_MODULE" not in result
    assert str(ROOT) not in result  # not even the server's working directory


async def test_the_command_environment_holds_no_secret_names(tools: ToolRegistry) -> None:
    names = {line.split("=", 1)[0] for line in (await run(tools, "env")).splitlines()[:-1]}
    fixed = {"PATH", "HOME", "TMPDIR", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "PWD"}
    assert fixed <= names <= fixed | {"TZ", "LANGUAGE"} | {n for n in names if n[:3] == "LC_"}


def test_only_the_locale_of_the_server_environment_reaches_the_sandbox() -> None:
    server = {
        "LANG": "de_DE.UTF-8",
        "LC_TIME": "C",
        "TZ": "Europe/Berlin",
        "GITHUB_TOKEN": SECRET,
        "OPENAI_API_KEY": SECRET,
        "DATABASE_URL": "postgres://u:p@h/db",
        "REDIS_URL": "redis://h",
        "DJANGO_SETTINGS_MODULE": "agentsite.settings",
        "SOME_SECRET": SECRET,
    }
    env = sandbox_env(server)
    assert {env["LANG"], env["LC_TIME"], env["TZ"]} == {"de_DE.UTF-8", "C", "Europe/Berlin"}
    assert not set(env) & {"GITHUB_TOKEN", "OPENAI_API_KEY", "DATABASE_URL", "SOME_SECRET"}


def test_unfenced_commands_inherit_no_secret_either() -> None:
    names = set(settings.AGENT_EXEC_ENV)
    for fragment in ("KEY", "TOKEN", "PASSWORD", "SECRET", "DATABASE_URL", "REDIS_URL"):
        assert not any(fragment in name.upper() for name in names), fragment
    assert "DJANGO_SETTINGS_MODULE" not in names


async def test_the_project_database_and_secret_key_are_not_there(tools: ToolRegistry) -> None:
    data_dir = Path(settings.DATA_DIR)
    targets = [ROOT, ROOT / "manage.py", data_dir, data_dir / "secret_key", Path.home()]
    result = await run(tools, " ; ".join(f"ls -d '{target}'" for target in targets))
    for target in targets:
        assert f"cannot access '{target}'" in result, target
    assert "top secret" not in await run(tools, "cat /tmp/*/outside/secret.txt; ls /")


async def test_only_what_a_shell_needs_is_visible(tools: ToolRegistry, workspace: Path) -> None:
    listing = await run(tools, "ls /; ls /etc")
    top = set(listing.split("\n\n")[0].splitlines()) if "\n\n" in listing else set()
    assert "root" not in listing.split() and "home" not in listing.split()
    assert "shadow" not in listing and "sudoers" not in listing
    assert top <= {"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "sbin"} | {
        "tmp",
        "usr",
        workspace.parts[1],
    }
    assert "uid=1000(agent)" in await run(tools, "id")


async def test_the_server_processes_are_not_visible(tools: ToolRegistry) -> None:
    result = await run(tools, "ls /proc | grep -c '^[0-9]'; cat /proc/1/cmdline | tr '\\0' ' '")
    assert int(result.splitlines()[0]) < 10  # the sandbox's own few processes
    assert result.splitlines()[1].startswith(shutil.which("bwrap") or "bwrap")


async def test_only_the_workspace_is_writable(tools: ToolRegistry, workspace: Path) -> None:
    places = ["/x", "/usr/x", "/etc/x", "/bin/x", "/dev/x", "/proc/x", "/sys/x", "/run/x"]
    result = await run(
        tools, f"echo ok > mine.txt; echo ok > /tmp/scratch; touch {' '.join(places)}"
    )
    assert (workspace / "mine.txt").read_text() == "ok\n"
    for place in places:
        assert f"cannot touch '{place}'" in result
    assert result.count("cannot touch") == len(places)  # the private /tmp is writable
    assert not os.path.exists("/usr/x") and not os.path.exists("/x")


@pytest.mark.parametrize(
    "target",
    [ROOT / "manage.py", ROOT / "agentsite" / "settings.py", ROOT / ".venv" / "pyvenv.cfg"],
)
async def test_a_link_to_the_project_leads_nowhere(tools: ToolRegistry, target: Path) -> None:
    result = await run(tools, f"ln -s '{target}' project.lnk && cat project.lnk")
    assert "No such file or directory" in result
    read = await tools.execute("read_file", {"path": "project.lnk"})
    assert read.startswith("Error") and "outside the workspace" in read


@pytest.mark.parametrize(
    "path",
    [
        "/proc/self/environ",  # the server's own environment: the file tools run in it
        "/proc/self/cmdline",
        str(Path(settings.DATA_DIR) / "secret_key"),
        str(ROOT / "data" / "db.sqlite3"),
        "../../../../../../etc/passwd",
        "~/.bashrc",
    ],
)
async def test_the_file_tools_cannot_reach_the_servers_secrets(
    tools: ToolRegistry, path: str
) -> None:
    for tool, extra in [
        ("read_file", {}),
        ("write_file", {"content": "x"}),
        ("append_file", {"content": "x"}),
        ("edit_file", {"old_text": "a", "new_text": "b"}),
    ]:
        result = await tools.execute(tool, {"path": path, **extra})
        assert result.startswith("Error") and "outside the workspace" in result, (tool, result)


def test_the_sandbox_dies_with_the_server(workspace: Path) -> None:
    """A server killed outright (SIGKILL, out of memory) leaves no command running."""
    sleepers = (sleeper(3061), sleeper(3062))
    script = (
        "import asyncio\n"
        "from agent.tools.guards import Workspace\n"
        "from agent.tools import ExecTool, ToolContext\n"
        f"tool = ExecTool(Workspace({str(workspace)!r}), timeout=60, env={{}})\n"
        "asyncio.run(tool.execute(ToolContext.detached(), "
        f"command='{sleepers[0]} & setsid {sleepers[1]} & wait'))\n"
    )
    server = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT)
    try:
        deadline = time.monotonic() + 10
        # The sleepers themselves, not bwrap or a shell whose arguments name them.
        while not all(host_processes(command, whole=True) for command in sleepers):
            assert time.monotonic() < deadline and server.poll() is None
            time.sleep(0.05)
    finally:
        server.kill()
        server.wait()
    deadline = time.monotonic() + 3
    while any(map(host_processes, sleepers)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(map(host_processes, sleepers))


@needs(find_parent() is None, "needs a cgroup this process can make (root)")
def test_what_a_dead_server_left_in_its_cgroups_is_killed() -> None:
    """A server killed in the moment between starting a sandbox and the sandbox tying itself
    to the server's life leaves a command behind; the next server to look cleans it up."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    parent = find_parent()
    assert parent is not None
    stale = {folder / f"{gone.pid}-0" for folder in parent.parents.values()}
    orphan = subprocess.Popen(["sleep", "3071"])
    try:
        for folder in stale:
            folder.mkdir()
            (folder / "cgroup.procs").write_text(str(orphan.pid))
        assert find_parent() is not None  # looks, kills, removes
        assert orphan.wait(timeout=5) == -signal.SIGKILL
        assert not any(folder.exists() for folder in stale)
    finally:
        orphan.kill()


@needs(find_parent() is None, "needs a cgroup this process can make (root)")
async def test_what_outlives_a_command_in_its_cgroup_is_killed_when_it_ends(
    tools: ToolRegistry,
) -> None:
    """A sandbox whose bwrap was killed in the moment before its first process tied itself
    to bwrap's life runs on, outside the group a cancellation kills; its cgroup does not let
    it: here a process put there by hand stands for it."""
    parent = find_parent()
    assert parent is not None
    folders = set(parent.parents.values())
    before = {child for folder in folders for child in folder.iterdir() if child.is_dir()}
    command = asyncio.create_task(run(tools, f"{sleeper(2)}"))
    escaped = await asyncio.create_subprocess_exec("sleep", "3081")
    try:
        deadline = time.monotonic() + 10
        while not (
            mine := {
                child
                for folder in folders
                for child in folder.iterdir()
                if child.is_dir() and child.name.startswith(f"{os.getpid()}-")
            }
            - before
        ):
            assert time.monotonic() < deadline and not command.done()
            await asyncio.sleep(0.01)
        for child in mine:
            (child / "cgroup.procs").write_text(str(escaped.pid))
        assert (await command).endswith("Exit code: 0")
        assert await asyncio.wait_for(escaped.wait(), 5) == -signal.SIGKILL
    finally:
        if escaped.returncode is None:
            escaped.kill()
            await escaped.wait()


async def test_a_fork_bomb_is_capped_and_cleaned_up(tools: ToolRegistry) -> None:
    # Every copy of the shell carries the command line that names it, wherever it ends up;
    # what else the host runs meanwhile (the suite's other pass, say) does not.
    marker = f"bomb {sleeper(0)}"
    peak = 0

    async def watch() -> None:
        nonlocal peak
        while True:
            peak = max(peak, len(host_processes(marker)))
            await asyncio.sleep(0.01)

    watcher = asyncio.create_task(watch())
    started = time.monotonic()
    result = await run(tools, f"f(){{ f&f; }}; f  # {marker}", timeout=3)
    watcher.cancel()
    assert time.monotonic() - started < 6
    assert "fork" in result.lower()  # the shell reports the forks it was refused
    # At most 32 processes for the bomb and a few for the sandbox, which names it too.
    assert peak <= 32 + 10, peak
    await asyncio.sleep(0.5)
    assert not host_processes(marker)


async def test_the_process_count_is_capped(tools: ToolRegistry) -> None:
    result = await run(tools, f"for i in $(seq 100); do {sleeper(3041)} & done; wait")
    assert "Cannot fork" in result
    assert await wait_gone(sleeper(3041))


async def test_limits_are_set_for_every_process(tools: ToolRegistry) -> None:
    limits = await run(tools, "cat /proc/self/limits", timeout=4)
    rows = {line[:26].strip(): line[26:].split() for line in limits.splitlines()[1:-1]}
    assert rows["Max processes"][:2] == ["32", "32"]
    assert rows["Max cpu time"][:2] == ["4", "4"]
    assert rows["Max data size"][:2] == [str(256 * 1024 * 1024)] * 2
    assert rows["Max core file size"][:2] == ["0", "0"]


@needs(not SYSTEM_PYTHON.exists(), "needs the system's python3 to allocate")
async def test_memory_is_capped(tools: ToolRegistry) -> None:
    result = await run(tools, "python3 -c 'bytearray(400 * 1024 * 1024)'")
    assert "MemoryError" in result


async def test_cpu_time_is_capped_by_the_timeout(tools: ToolRegistry) -> None:
    started = time.monotonic()
    result = await run(tools, "while :; do :; done", timeout=2)
    assert result.startswith("Error: command timed out after 2 seconds")
    assert time.monotonic() - started < 5


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP port on the host's loopback that accepts connections."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server.getsockname()[1]


def connect_command(port: int) -> str:
    return (
        f'python3 -c \'import socket; socket.create_connection(("127.0.0.1", {port}), 2); '
        'print("connected")\''
    )


@needs(not SYSTEM_PYTHON.exists(), "needs the system's python3 to connect")
async def test_the_network_is_off(tools: ToolRegistry, listener: int) -> None:
    result = await run(tools, connect_command(listener))
    assert "connected" not in result and "Error" in result


@needs(not SYSTEM_PYTHON.exists(), "needs the system's python3 to connect")
async def test_with_the_network_on_the_hosts_loopback_is_still_out_of_reach(
    workspace: Path, listener: int
) -> None:
    """The network a setting allows is the internet's, not the host's:
    `tests/test_sandbox_network.py` holds the rest."""
    if sandbox_module.network_helper_missing() is not None:
        skip_for_missing(str(sandbox_module.network_helper_missing()))
    tool = ExecTool(Workspace(workspace), timeout=5, limits=Limits(network=True))
    result = await tool.execute(OUTSIDE_A_TURN, command=connect_command(listener))
    assert "connected" not in result and "Connection refused" in result


@pytest.fixture
def no_sandbox(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """A machine without bubblewrap on its PATH."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    sandbox_module._probe.cache_clear()
    yield
    sandbox_module._probe.cache_clear()


async def test_without_a_sandbox_exec_refuses_instead_of_running_unfenced(
    no_sandbox: None, workspace: Path
) -> None:
    assert "bubblewrap" in (sandbox_module.unavailable_reason() or "")
    tool = ExecTool(Workspace(workspace), timeout=5, env={})
    registry = ToolRegistry()
    registry.register(tool)
    result = await registry.execute("exec", {"command": "touch ran.txt"})
    assert result.startswith("Error: exec is disabled on this server")
    assert "apt install bubblewrap" in result
    assert not (workspace / "ran.txt").exists()


def test_without_a_sandbox_the_site_says_so_at_start_up(no_sandbox: None) -> None:
    warning = sandbox_module.startup_warning(restrict=True) or ""
    assert warning.startswith("exec is disabled") and "apt install bubblewrap" in warning
    assert sandbox_module.startup_warning(restrict=False) is None


def test_with_a_sandbox_the_site_starts_quietly() -> None:
    assert sandbox_module.startup_warning(restrict=True) is None


async def test_without_the_restriction_exec_runs_unfenced(no_sandbox: None, workspace: Path):
    tool = ExecTool(Workspace(workspace, restrict=False), timeout=5, env={"PATH": os.defpath})
    assert await tool.execute(OUTSIDE_A_TURN, command="echo unfenced") == "unfenced\nExit code: 0"


RUNUSER = shutil.which("runuser", path="/usr/sbin:/sbin:/usr/bin:/bin")


def run_as_nobody(script: str, *, cwd: Path, path: str) -> subprocess.CompletedProcess[str]:
    """`script` run by the system's python3 as `nobody`, with the site's code importable."""
    site_packages = next((ROOT / ".venv" / "lib").glob("python3*/site-packages"))
    return subprocess.run(
        [str(RUNUSER), "-u", "nobody", "--", str(SYSTEM_PYTHON), "-c", script],
        env={"PATH": path, "PYTHONPATH": f"{ROOT}:{site_packages}"},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _ordinary_user_python() -> str | None:
    """Why the ordinary-user test cannot run here, or None when it can."""
    if os.geteuid() != 0 or RUNUSER is None:
        return "needs root and runuser to switch to an ordinary user (as one, the others cover it)"
    if not SYSTEM_PYTHON.exists():
        return "needs the system's python3"
    version = subprocess.run(
        [SYSTEM_PYTHON, "-c", "import sys; print(sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    if version != str(sys.version_info[:2]):
        return f"the system's python3 {version} cannot load this interpreter's packages"
    return None


WHY_NOT_AS_NOBODY = _ordinary_user_python()


@needs(WHY_NOT_AS_NOBODY is not None, str(WHY_NOT_AS_NOBODY))
def test_as_an_ordinary_user_the_process_cap_holds_without_cgroups() -> None:
    """Most servers run as an ordinary user: there the kernel's per-user process limit,
    counted per sandbox, is what caps a fork bomb."""
    with tempfile.TemporaryDirectory() as folder:
        os.chmod(folder, 0o755)  # pytest's own temporary folders are root's alone
        workspace = Path(folder, "nobody-ws")
        workspace.mkdir()
        shutil.chown(workspace, user="nobody")
        _exec_as_nobody(workspace, Path(folder))


def _exec_as_nobody(workspace: Path, cwd: Path) -> None:
    script = (
        "import asyncio\n"
        "from agent.tools.guards import Workspace\n"
        "from agent.tools.sandbox import Limits, find_sandbox\n"
        "from agent.tools import ExecTool, ToolContext\n"
        "assert find_sandbox().cgroups is None\n"
        f"tool = ExecTool(Workspace({str(workspace)!r}), timeout=5, limits=Limits(16), env={{}})\n"
        "print(asyncio.run(tool.execute(ToolContext.detached(), command='id -un; f(){ f&f; }; f')))\n"
    )
    done = run_as_nobody(script, cwd=cwd, path="/usr/bin:/bin")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("agent\n")
    assert "Cannot fork" in done.stdout
