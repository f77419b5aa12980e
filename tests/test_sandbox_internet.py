"""`exec` with the network on reaches the internet: a small one of the test's own, a host
with a public address in a network namespace, routed from this host, serving HTTP and DNS
(`tests/internet_host.py`). By address, and by name through the sandbox's resolver; not
this host's own public address. Real bubblewrap and slirp4netns; as root."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent.tools.shell import ExecTool
from tests.conftest import needs
from tests.internet_host import PAGE
from tests.test_sandbox_network import (
    OUTSIDE_A_TURN,
    ROOT,
    connects_from_the_host,
    network_or_skip,
    networked_tool,
    reach,
)

IP = shutil.which("ip", path="/usr/sbin:/sbin:/usr/bin:/bin")
UNSHARE = shutil.which("unshare", path="/usr/bin:/bin")
NAME = "web.internet.test"
# Run inside the sandbox: prints what a URL answers.
FETCH = "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=10).read())"
pytestmark = [
    needs(not Path("/usr/bin/python3").exists(), "needs the system's python3"),
    needs(
        os.geteuid() != 0 or IP is None,
        "a network namespace for the test's own internet host needs root and iproute2",
    ),
]


@pytest.fixture(autouse=True)
def _network_for_sandboxes() -> None:
    network_or_skip()


@pytest.fixture
def networked(workspace: Path) -> ExecTool:
    (workspace / "fetch.py").write_text(FETCH)
    return networked_tool(workspace)


@pytest.fixture
def host_listener() -> Iterator[int]:
    """A TCP port listening on all of this host's IPv4 addresses."""
    with socket.socket() as listener:
        listener.bind(("0.0.0.0", 0))
        listener.listen()
        yield listener.getsockname()[1]


@dataclass(frozen=True)
class Internet:
    address: str  # the internet host's, public
    host_address: str  # a public address of this host's own interface towards it


def ip(*args: str) -> subprocess.CompletedProcess[str]:
    assert IP is not None
    return subprocess.run([IP, *args], capture_output=True, text=True, check=False)


@pytest.fixture(scope="module")
def internet() -> Iterator[Internet]:
    """A host with a public address in a network namespace of its own, routed from this
    host through a veth pair, serving HTTP and DNS (`tests/internet_host.py`). This host's
    side of the pair has a public address too: one of the host's own."""
    tag = os.getpid()
    assert IP is not None
    namespace, outer, inner = f"agentsite-inet-{tag}", f"agi{tag}o", f"agi{tag}i"
    server: subprocess.Popen[str] | None = None
    assert ip("netns", "add", namespace).returncode == 0
    try:
        assert (
            ip(
                "link", "add", outer, "type", "veth", "peer", "name", inner, "netns", namespace
            ).returncode
            == 0
        )
        assert ip("link", "set", outer, "up").returncode == 0
        # Another run of the suite may hold one of these addresses: the route says so.
        for last in (*range(4 + tag % 200, 254), *range(4, 4 + tag % 200)):
            address, own = f"1.2.3.{last}", f"1.2.4.{last}"
            if ip("route", "add", f"{address}/32", "dev", outer).returncode == 0:
                break
        else:
            pytest.fail("no free address for the test's internet host")
        assert ip("addr", "add", f"{own}/32", "dev", outer).returncode == 0
        for step in (
            ("addr", "add", f"{address}/32", "dev", inner),
            ("link", "set", "lo", "up"),
            ("link", "set", inner, "up"),
            ("route", "add", "default", "dev", inner),
        ):
            assert ip("-n", namespace, *step).returncode == 0, step
        server = subprocess.Popen(
            [
                IP,
                "netns",
                "exec",
                namespace,
                sys.executable,
                str(ROOT / "tests" / "internet_host.py"),
                address,
                NAME,
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        yield Internet(address, own)
    finally:
        if server is not None:
            server.kill()
            server.wait()
        ip("netns", "del", namespace)  # the pair goes with it, and its routes and addresses


async def test_a_public_host_is_reachable_but_not_the_hosts_own_public_address(
    networked: ExecTool, internet: Internet, host_listener: int
) -> None:
    everywhere = host_listener
    assert connects_from_the_host(internet.host_address, everywhere)
    found = await reach(
        networked, [f"{internet.address}:80", f"{internet.host_address}:{everywhere}"]
    )
    assert found[f"{internet.address}:80"][0] == "connected"
    assert "Permission denied" in found[f"{internet.host_address}:{everywhere}"][0]
    page = await networked.execute(
        OUTSIDE_A_TURN, command=f"python3 fetch.py http://{internet.address}/"
    )
    assert repr(PAGE) in page


def test_names_resolve_through_the_helpers_resolver(
    workspace: Path, internet: Internet, tmp_path: Path
) -> None:
    """The sandbox asks slirp4netns (10.0.2.3), which asks the host's name server: here the
    internet host's, named in a resolv.conf of a mount namespace of the test's own."""
    assert UNSHARE is not None and IP is not None
    resolv = tmp_path / "resolv.conf"
    resolv.write_text(f"nameserver {internet.address}\n")
    (workspace / "fetch.py").write_text(FETCH)
    script = (
        "import asyncio\n"
        "from agent.tools.guards import Workspace\n"
        "from agent.tools import ExecTool, Limits, ToolContext\n"
        f"tool = ExecTool(Workspace({str(workspace)!r}), timeout=30, limits=Limits(network=True), env={{}})\n"
        f"command = 'cat /etc/resolv.conf; getent hosts {NAME}; python3 fetch.py http://{NAME}/'\n"
        "print(asyncio.run(tool.execute(ToolContext.detached(), command=command)))\n"
    )
    done = subprocess.run(
        [
            UNSHARE,
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            'mount --bind "$0" /etc/resolv.conf && exec "$1" -c "$2"',
            str(resolv),
            sys.executable,
            script,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "nameserver 10.0.2.3" in done.stdout  # the sandbox's own resolv.conf
    assert [internet.address, NAME] in [line.split() for line in done.stdout.splitlines()]
    assert repr(PAGE) in done.stdout
    assert done.stdout.rstrip().endswith("Exit code: 0")
