"""`exec` with the network on (`AGENT_EXEC_NETWORK`): the sandbox reaches nothing of the
host, its networks or its cloud, cannot change that, and its helper runs confined; without
the helper, no command gets a network at all. Real bubblewrap and slirp4netns. What it does
reach, the internet, is in `tests/test_sandbox_internet.py`."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.checks import exec_problems
from agent.tools import Limits, ToolContext
from agent.tools import sandbox as sandbox_module
from agent.tools.guards import Workspace
from agent.tools.netrules import host_addresses
from agent.tools.shell import ExecTool
from agent.tools.tool_errors import ToolError
from tests.conftest import needs, skip_for_missing
from tests.test_security_exec import WHY_NOT_AS_NOBODY, run_as_nobody
from tests.test_tools_exec import host_processes, sleeper

ROOT = Path(__file__).resolve().parent.parent
pytestmark = needs(not Path("/usr/bin/python3").exists(), "needs the system's python3")
OUTSIDE_A_TURN = ToolContext.detached()

# Run inside the sandbox: tries each HOST:PORT and says how it went and how long it took.
REACH = """
import json, socket, sys, time
found = {}
for target in sys.argv[1:]:
    host, _, port = target.rpartition(":")
    started = time.monotonic()
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
        outcome = "connected"
    except OSError as exc:
        outcome = f"{type(exc).__name__}: {exc.strerror or exc}"
    found[target] = [outcome, round(time.monotonic() - started, 2)]
print(json.dumps(found))
"""


def network_or_skip() -> None:
    """Skips where the machine lacks what a sandbox's network needs; where it has it, the
    network must work."""
    missing = sandbox_module.network_helper_missing()
    if missing is not None or not Path("/dev/net/tun").exists():
        skip_for_missing(f"no sandbox can have a network here: {missing or 'no /dev/net/tun'}")
    assert sandbox_module.network_problem() is None


@pytest.fixture(autouse=True)
def _network_for_sandboxes() -> None:
    network_or_skip()


def networked_tool(workspace: Path) -> ExecTool:
    """`exec` whose commands may use the network, with `reach.py` in its workspace."""
    (workspace / "reach.py").write_text(REACH)
    return ExecTool(Workspace(workspace), timeout=30, limits=Limits(network=True), env={})


@pytest.fixture
def networked(workspace: Path) -> ExecTool:
    return networked_tool(workspace)


async def reach(tool: ExecTool, targets: list[str]) -> dict[str, tuple[str, float]]:
    result = await tool.execute(OUTSIDE_A_TURN, command=f"python3 reach.py {' '.join(targets)}")
    assert result.endswith("Exit code: 0"), result
    return {
        target: (outcome, took)
        for target, (outcome, took) in json.loads(result.splitlines()[0]).items()
    }


def refused_at_once(found: dict[str, tuple[str, float]]) -> dict[str, tuple[str, float]]:
    """The targets that were reached, or that took long to fail (a hang, not a refusal)."""
    return {
        target: (outcome, took)
        for target, (outcome, took) in found.items()
        if outcome == "connected" or took > 2.0
    }


@pytest.fixture
def host_listeners() -> Iterator[tuple[int, int]]:
    """A TCP port listening on the host's loopback, and one on all its addresses (IPv4
    and, where the host has it, IPv6)."""
    with socket.socket() as loopback, _everywhere() as everywhere:
        loopback.bind(("127.0.0.1", 0))
        for listener in (loopback, everywhere):
            listener.listen()
        yield loopback.getsockname()[1], everywhere.getsockname()[1]


def _everywhere() -> socket.socket:
    if not socket.has_dualstack_ipv6():
        listener = socket.socket()
        listener.bind(("0.0.0.0", 0))
        return listener
    listener = socket.socket(socket.AF_INET6)
    listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    listener.bind(("::", 0))
    return listener


def connects_from_the_host(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=2).close()
    except OSError:
        return False
    return True


async def test_the_hosts_loopback_services_are_out_of_reach(
    networked: ExecTool, host_listeners: tuple[int, int]
) -> None:
    loopback, everywhere = host_listeners
    services = [f"127.0.0.1:{loopback}", f"127.0.0.1:{everywhere}", "127.0.0.1:6379"]
    services += ["127.0.0.1:5432", f"[::ffff:127.0.0.1]:{loopback}", f"[::1]:{everywhere}"]
    assert connects_from_the_host("127.0.0.1", loopback)
    found = await reach(networked, services)
    assert refused_at_once(found) == {}
    assert all("refused" in outcome for outcome, _ in found.values()), found  # its own loopback


def host_ipv6_addresses() -> set[ipaddress.IPv6Address]:
    """This host's own global and unique-local IPv6 addresses."""
    found: set[ipaddress.IPv6Address] = set()
    table = Path("/proc/net/if_inet6")
    for line in table.read_text().splitlines() if table.exists() else ():
        address = ipaddress.IPv6Address(int(line.split()[0], 16))
        if not (address.is_link_local or address.is_loopback):
            found.add(address)
    return found


async def test_private_link_local_metadata_and_the_hosts_own_addresses_are_refused_at_once(
    networked: ExecTool, host_listeners: tuple[int, int]
) -> None:
    _, everywhere = host_listeners
    own = [a for a in host_addresses() if not a.is_loopback] + sorted(host_ipv6_addresses())
    targets = [f"[{address}]:{everywhere}" for address in own]
    assert all(connects_from_the_host(str(address), everywhere) for address in own)
    targets += [
        "10.0.2.2:80",  # slirp4netns's gateway, which is the host
        "10.0.2.3:80",  # its resolver, on any port but DNS's
        "10.0.2.3:5432",
        "10.1.2.3:80",
        "172.16.0.1:80",
        "192.168.1.1:80",
        "100.64.0.1:80",  # carrier-grade NAT
        "169.254.169.254:80",  # cloud metadata
        "168.63.129.16:80",  # Azure's platform endpoint
        "[fd00:ec2::254]:80",  # AWS's metadata over IPv6
        "[2606:4700:4700::1111]:80",  # the sandbox has no IPv6 at all
        "224.0.0.1:80",
    ]
    found = await reach(networked, targets)
    assert refused_at_once(found) == {}
    assert all("Permission denied" in outcome for outcome, _ in found.values()), found


async def test_the_command_has_no_power_over_its_network(networked: ExecTool) -> None:
    result = await networked.execute(
        OUTSIDE_A_TURN,
        command="ip rule; ip rule del pref 1002 && echo DELETED; ip route flush table main "
        "&& echo FLUSHED; unshare -U -r true && echo USERNS; grep ^Cap /proc/self/status",
    )
    assert "10.0.0.0/8 prohibit" in result and "169.254.0.0/16 prohibit" in result
    assert "DELETED" not in result and "FLUSHED" not in result and "USERNS" not in result
    assert result.count("Operation not permitted") >= 2
    caps = [line.split()[1] for line in result.splitlines() if line.startswith("Cap")]
    assert caps == ["0000000000000000"] * 5


@needs(WHY_NOT_AS_NOBODY is not None, str(WHY_NOT_AS_NOBODY))
def test_as_an_ordinary_user_the_network_is_fenced_the_same(
    tmp_path: Path, host_listeners: tuple[int, int]
) -> None:
    """A site run as an ordinary user starts the helper as itself, without a sandbox of
    its own around it; what the command may reach is the same."""
    loopback, everywhere = host_listeners
    workspace = tmp_path / "nobody-ws"
    workspace.mkdir()
    (workspace / "reach.py").write_text(REACH)
    shutil.chown(workspace, user="nobody")
    own = next(str(a) for a in sorted(host_addresses()) if not a.is_loopback)
    targets = [f"127.0.0.1:{loopback}", "10.0.2.2:80", "169.254.169.254:80", f"{own}:{everywhere}"]
    script = (
        "import asyncio\n"
        "from agent.tools.guards import Workspace\n"
        "from agent.tools import ExecTool, Limits, ToolContext\n"
        f"tool = ExecTool(Workspace({str(workspace)!r}), timeout=20, limits=Limits(network=True), env={{}})\n"
        f"command = 'ip rule; python3 reach.py {' '.join(targets)}'\n"
        "print(asyncio.run(tool.execute(ToolContext.detached(), command=command)))\n"
    )
    done = run_as_nobody(script, cwd=tmp_path, path="/usr/bin:/bin:/usr/sbin:/sbin")
    assert done.returncode == 0, done.stderr
    assert "169.254.0.0/16 prohibit" in done.stdout, done.stdout
    found = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("{")))
    assert refused_at_once({t: (o, took) for t, (o, took) in found.items()}) == {}
    assert "refused" in found[f"127.0.0.1:{loopback}"][0]


def helper_processes() -> list[int]:
    """The slirp4netns processes this process started, found from the host."""
    found = []
    for pid in host_processes("slirp4netns"):
        parent = pid
        while parent > 1:
            try:
                status = Path(f"/proc/{parent}/status").read_text()
            except OSError:
                break
            parent = int(
                next(line for line in status.splitlines() if line.startswith("PPid:")).split()[1]
            )
            if parent == os.getpid():
                found.append(pid)
                break
    return [
        pid
        for pid in found
        if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"/usr/bin/slirp4netns")
    ]


def status_of(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {key: value.strip() for key, _, value in (line.partition(":") for line in lines)}


async def test_the_helper_runs_confined_and_ends_with_the_command(networked: ExecTool) -> None:
    task = asyncio.create_task(
        networked.execute(OUTSIDE_A_TURN, command=f"{sleeper(3)}; echo done")
    )
    deadline = time.monotonic() + 10
    while not (helpers := helper_processes()):
        assert time.monotonic() < deadline and not task.done(), "no slirp4netns seen"
        await asyncio.sleep(0.02)
    status = status_of(helpers[0])
    assert status["Seccomp"] == "2" and status["NoNewPrivs"] == "1"
    assert status["CapEff"] == "0000000000000000"
    if os.geteuid() == 0:
        assert status["Uid"].split() == [str(Limits().host_uid)] * 4
        assert status["Gid"].split() == [str(Limits().host_uid)] * 4
        # A file system of its own: /usr, and of /etc what it reads, nothing else.
        seen = Path(f"/proc/{helpers[0]}/root")
        assert os.readlink(f"/proc/{helpers[0]}/ns/mnt") != os.readlink("/proc/self/ns/mnt")
        assert set(os.listdir(seen / "etc")) <= {
            "resolv.conf",
            "ld.so.cache",
            "ld.so.conf",
            "ld.so.conf.d",
        }
        assert not {"home", "root", "srv", "var", ROOT.parts[1]} & set(os.listdir(seen))
    assert (await task).endswith("done\nExit code: 0")
    deadline = time.monotonic() + 5
    while any(Path(f"/proc/{pid}").exists() for pid in helpers):
        assert time.monotonic() < deadline, "slirp4netns outlived its command"
        await asyncio.sleep(0.05)


@pytest.fixture
def no_helper(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """A machine with bubblewrap and util-linux but without slirp4netns."""
    tools = tmp_path / "bin-without-slirp4netns"
    tools.mkdir()
    for name in ("bwrap", "prlimit", "setpriv"):
        found = shutil.which(name)
        if found is not None:
            (tools / name).symlink_to(found)
    monkeypatch.setenv("PATH", str(tools))
    sandbox_module._probe.cache_clear()
    sandbox_module._probe_network.cache_clear()
    yield
    sandbox_module._probe.cache_clear()
    sandbox_module._probe_network.cache_clear()


async def test_without_the_helper_commands_with_network_are_refused_plainly(
    no_helper: None, workspace: Path
) -> None:
    tool = ExecTool(Workspace(workspace), timeout=5, limits=Limits(network=True), env={})
    registry_result = await _exec(tool, "touch ran.txt")
    assert registry_result.startswith("Error: exec is disabled on this server")
    assert "slirp4netns" in registry_result and "AGENT_EXEC_NETWORK" in registry_result
    assert not (workspace / "ran.txt").exists()  # not run at all, with or without a network
    offline = ExecTool(Workspace(workspace), timeout=5, limits=Limits(), env={})
    assert (await _exec(offline, "echo offline")).startswith("offline")


def test_without_the_helper_the_site_says_so_at_start_up(no_helper: None, settings) -> None:
    warning = sandbox_module.startup_warning(restrict=True, network=True) or ""
    assert warning.startswith("exec is disabled: AGENT_EXEC_NETWORK is on")
    assert "apt install slirp4netns" in warning
    assert sandbox_module.startup_warning(restrict=True, network=False) is None
    settings.AGENT_EXEC_NETWORK = True
    assert any("slirp4netns" in problem for problem in exec_problems())
    settings.AGENT_EXEC_NETWORK = False
    assert not any("slirp4netns" in problem for problem in exec_problems())


async def _exec(tool: ExecTool, command: str) -> str:
    from agent.tools import ToolRegistry

    registry = ToolRegistry()
    registry.register(tool)
    return await registry.execute("exec", {"command": command})


def cgroups_of_this_process() -> set[Path]:
    found = sandbox_module.find_sandbox()
    if found.cgroups is None:
        return set()
    return {
        child
        for parent in set(found.cgroups.parents.values())
        for child in parent.glob(f"{os.getpid()}-*")
    }


async def test_a_sandbox_that_cannot_be_set_up_leaves_nothing_open(
    networked: ExecTool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Descriptors ran out part way (the second of its small files): the network's pipes,
    the first file's descriptor and the cgroup were left behind, fewer still for the next."""
    await networked.execute(OUTSIDE_A_TURN, command="true")  # the one-time probes, done
    made = sandbox_module.data_fd
    calls = iter([made, None])

    def runs_out(text: str) -> int:
        step = next(calls, None)
        if step is None:
            raise OSError(24, "Too many open files")
        return step(text)

    monkeypatch.setattr(sandbox_module, "data_fd", runs_out)
    fds_before, cgroups_before = set(os.listdir("/proc/self/fd")), cgroups_of_this_process()

    with pytest.raises(ToolError, match=r"could not set up the sandbox.*Too many open files"):
        await networked.execute(OUTSIDE_A_TURN, command="true")

    assert set(os.listdir("/proc/self/fd")) <= fds_before
    assert cgroups_of_this_process() <= cgroups_before
