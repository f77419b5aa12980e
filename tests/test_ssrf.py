"""The network guard: which addresses the web tools (and URLs in `exec` commands) may
reach, how hosts are resolved and checked, and that redirects and connections are checked
again. No test resolves an internet name: public cases use literal addresses or an
injected resolver."""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from agent.tools import ToolContext, ToolRegistry, WebSettings, build_registry
from agent.tools.guards import (
    AddressGuard,
    GuardError,
    IPAddress,
    UnresolvableHost,
    address_problem,
    parse_ip_literal,
    urls_in,
)
from agent.tools.guards import Workspace as Fence
from agent.tools.shell import ExecTool
from agent.tools.web import WebFetchTool
from tests.test_web_tools import WebServer, send

CTX = ToolContext.detached()
PUBLIC = "93.184.215.14"
LOOPBACK_ONE = ipaddress.ip_address("127.0.0.1")


# --- the address check --------------------------------------------------------------------

REFUSED = {
    "127.0.0.1": "loopback",
    "127.255.255.254": "loopback",
    "::1": "loopback",
    "10.1.2.3": "private",
    "172.16.0.1": "private",
    "172.31.255.255": "private",
    "192.168.1.1": "private",
    "169.254.169.254": "cloud metadata",
    "168.63.129.16": "cloud platform endpoint",
    "169.254.1.1": "link-local",
    "fe80::1": "link-local",
    "fe80::1%1": "link-local",
    "100.64.0.1": "carrier-grade NAT",
    "100.127.255.254": "carrier-grade NAT",
    "224.0.0.1": "multicast",
    "239.255.255.250": "multicast",
    "ff02::1": "multicast",
    "0.0.0.0": "unspecified",
    "0.1.2.3": "unspecified",
    "::": "unspecified",
    "255.255.255.255": "reserved",
    "240.0.0.1": "reserved",
    "192.0.2.1": "private",  # documentation
    "198.18.0.1": "private",  # benchmarking
    "fc00::1": "unique-local",
    "fd12:3456::1": "unique-local",
    "fec0::1": "site-local",
    "::ffff:127.0.0.1": "loopback",
    "::ffff:169.254.169.254": "cloud metadata",
    "::ffff:10.0.0.1": "private",
    "::127.0.0.1": "loopback",  # IPv4-compatible
    "::10.0.0.1": "private",
    "2002:7f00:1::": "loopback",  # 6to4 of 127.0.0.1
    "2002:a9fe:a9fe::1": "cloud metadata",  # 6to4 of 169.254.169.254
    "64:ff9b::7f00:1": "loopback",  # NAT64 of 127.0.0.1
    "64:ff9b::a00:1": "private",
    "64:ff9b:1::1": "local-use NAT64",
    "2001:db8::1": "private",  # documentation
    "2001::1": "private",  # Teredo
}


@pytest.mark.parametrize(("address", "reason"), REFUSED.items())
def test_non_public_addresses_are_refused(address: str, reason: str) -> None:
    problem = address_problem(ipaddress.ip_address(address))
    assert problem is not None and reason in problem


@pytest.mark.parametrize(
    "address",
    [PUBLIC, "8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"],
)
def test_public_addresses_pass(address: str) -> None:
    assert address_problem(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("2130706433", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("127.0.0.1.", "127.0.0.1"),
        ("0", "0.0.0.0"),
        ("[::ffff:127.0.0.1]", "::ffff:127.0.0.1"),
        ("[::1]", "::1"),
        ("169.254.43518", "169.254.169.254"),
    ],
)
def test_odd_spellings_of_addresses_are_read_as_addresses(host: str, address: str) -> None:
    assert parse_ip_literal(host) == ipaddress.ip_address(address)


@pytest.mark.parametrize("host", ["example.com", "1.2.3.4.5", "08.1", "256.1.1.1", "1.0x1g", "a.1"])
def test_names_are_not_addresses(host: str) -> None:
    assert parse_ip_literal(host) is None


def resolver(table: dict[str, Sequence[str]]):
    """A resolver that knows only ``table`` and counts its lookups."""
    calls: list[str] = []

    async def resolve(host: str, port: int) -> list[str]:
        calls.append(host)
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return list(table[host])

    resolve.calls = calls  # type: ignore[attr-defined]
    return resolve


@pytest.mark.parametrize(
    "host", ["2130706433", "0x7f.1", "127.1", "::ffff:127.0.0.1", "169.254.169.254", "0"]
)
async def test_literal_hosts_are_checked_without_a_lookup(host: str) -> None:
    lookup = resolver({})
    with pytest.raises(GuardError, match="address; only public internet addresses"):
        await AddressGuard(resolver=lookup).resolve(host, 80)
    assert lookup.calls == []  # type: ignore[attr-defined]


async def test_localhost_resolves_to_loopback_and_is_refused() -> None:
    with pytest.raises(GuardError, match=r"localhost \((127\.0\.0\.1|::1)\) is a loopback"):
        await AddressGuard().resolve("localhost", 80)


async def test_every_address_of_a_name_must_be_public() -> None:
    guard = AddressGuard(resolver=resolver({"mixed.test": [PUBLIC, "10.0.0.7"]}))
    with pytest.raises(GuardError, match=r"mixed\.test \(10\.0\.0\.7\) is a private address"):
        await guard.resolve("mixed.test", 443)
    guard = AddressGuard(resolver=resolver({"public.test": [PUBLIC, "2606:4700::1"]}))
    assert [str(ip) for ip in await guard.resolve("public.test", 443)] == [PUBLIC, "2606:4700::1"]


async def test_a_name_that_does_not_resolve_is_refused() -> None:
    with pytest.raises(UnresolvableHost, match=r"cannot resolve host 'nowhere\.test'"):
        await AddressGuard(resolver=resolver({})).resolve("nowhere.test", 80)


async def test_allow_private_lets_loopback_through() -> None:
    assert await AddressGuard(allow_private=True).resolve("127.0.0.1", 80) == [LOOPBACK_ONE]


# --- web_fetch ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[WebServer]:
    with WebServer() as running:
        yield running


@pytest.fixture(scope="module")
def other_server() -> Iterator[WebServer]:
    """A server on 127.0.0.2 (Linux routes all of 127/8 to loopback)."""
    with WebServer("127.0.0.2") as running:
        running.routes["/secret"] = lambda h: send(h, 200, "text/plain", b"internal secret")
        yield running


def only_127_0_0_1(ip: IPAddress) -> bool:
    """A policy for the tests: the test server's address, and public ones."""
    return ip == LOOPBACK_ONE or address_problem(ip) is None


async def fetch(tool: WebFetchTool, url: str) -> str:
    registry = ToolRegistry()
    registry.register(tool)
    return await registry.execute("web_fetch", {"url": url})


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:{port}/text",
        "http://localhost:{port}/text",
        "http://2130706433:{port}/text",
        "http://0x7f.1:{port}/text",
        "http://0177.0.0.1:{port}/text",
        "http://[::1]:{port}/text",
        "http://[::ffff:127.0.0.1]:{port}/text",
        "http://0.0.0.0:{port}/text",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "https://192.168.0.1/",
    ],
)
async def test_web_fetch_refuses_internal_addresses(tmp_path: Path, server, url: str) -> None:
    registry = build_registry(workspace=tmp_path / "ws")
    before = len(server.seen)
    result = await registry.execute("web_fetch", {"url": url.format(port=server.port)})
    assert result.startswith("Error: ")
    # httpx itself rejects some spellings (a leading-zero octet) as invalid URLs.
    assert "only public internet addresses" in result or "is not a valid URL" in result
    assert len(server.seen) == before  # nothing reached the server


async def test_the_policy_lets_the_test_server_through(server) -> None:
    result = await fetch(
        WebFetchTool(guard=AddressGuard(is_allowed=only_127_0_0_1)), server.url("/text")
    )
    assert "line one" in result


async def test_a_redirect_to_another_internal_address_is_checked_again(
    server, other_server
) -> None:
    # The target answers when asked directly: only the re-check can keep the secret.
    direct = WebFetchTool(WebSettings(allow_private=True))
    assert "internal secret" in await fetch(direct, other_server.url("/secret"))
    before = len(other_server.seen)

    tool = WebFetchTool(guard=AddressGuard(is_allowed=only_127_0_0_1))
    result = await fetch(tool, server.url(f"/to?url={other_server.url('/secret')}"))
    assert result.startswith("Error: 127.0.0.2 is a loopback address")
    assert "internal secret" not in result
    assert len(other_server.seen) == before


async def test_a_redirect_to_the_metadata_service_is_refused(server) -> None:
    tool = WebFetchTool(guard=AddressGuard(is_allowed=only_127_0_0_1))
    result = await fetch(tool, server.url("/to?url=http://169.254.169.254/latest/meta-data/"))
    assert result.startswith("Error: 169.254.169.254 is a link-local (cloud metadata service)")


async def test_a_redirect_to_a_name_of_an_internal_address_is_refused(server) -> None:
    lookup = resolver({"intranet.test": ["10.20.30.40"]})
    tool = WebFetchTool(guard=AddressGuard(is_allowed=only_127_0_0_1, resolver=lookup))
    result = await fetch(tool, server.url("/to?url=http://intranet.test/"))
    assert result.startswith("Error: intranet.test (10.20.30.40) is a private address")


@pytest.fixture
def twin_servers() -> Iterator[tuple[WebServer, WebServer]]:
    """Two servers on one port: 127.0.0.2 (allowed in the test) and 127.0.0.1 (not)."""
    for _ in range(20):
        with WebServer("127.0.0.2") as allowed:
            try:
                refused = WebServer("127.0.0.1", allowed.port)
            except OSError:
                continue  # that port is taken on 127.0.0.1: try another
            with refused:
                allowed.routes["/who"] = lambda h: send(h, 200, "text/plain", b"allowed server")
                refused.routes["/who"] = lambda h: send(h, 200, "text/plain", b"refused server")
                yield allowed, refused
                return
    pytest.skip("no port free on both 127.0.0.1 and 127.0.0.2")


async def test_the_connection_goes_to_the_address_that_was_checked(twin_servers) -> None:
    """A name that answers the check with one address and the connect with another (DNS
    rebinding) cannot win: the guard's one lookup is the address connected to."""
    allowed, refused = twin_servers
    answers = iter([["127.0.0.2"], ["127.0.0.1"], ["127.0.0.1"]])
    lookups: list[str] = []

    async def rebinding(host: str, port: int) -> list[str]:
        lookups.append(host)
        return next(answers)

    guard = AddressGuard(
        is_allowed=lambda ip: ip == ipaddress.ip_address("127.0.0.2"), resolver=rebinding
    )
    result = await fetch(WebFetchTool(guard=guard), f"http://rebind.test:{allowed.port}/who")
    assert "allowed server" in result and "refused server" not in result
    assert lookups == ["rebind.test"]
    assert refused.seen == []
    assert allowed.seen[-1].headers["Host"] == f"rebind.test:{allowed.port}"


# --- exec ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "curl http://169.254.169.254/latest/meta-data",
        "wget http://127.0.0.1:8080/",
        "curl -s 'http://localhost:8000/admin' | head",
        'sh -c "curl http://[::1]:9000/"',
        "python3 -c 'import urllib.request as u; u.urlopen(\"HTTP://10.0.0.5/x\")'",
        "curl http://2130706433/",
    ],
)
async def test_exec_refuses_commands_that_name_internal_urls(tmp_path: Path, command: str) -> None:
    registry = build_registry(workspace=tmp_path / "ws", exec_timeout=5)
    result = await registry.execute("exec", {"command": command})
    assert result.startswith("Error: command refused: ")
    assert "only reach public internet addresses" in result
    url = urls_in(command)[0]
    assert url in result


def unfenced_exec(tmp_path: Path, guard: AddressGuard | None = None, **options) -> ExecTool:
    # Commands run on the host: these tests are about the URL check, not the sandbox.
    fence = Fence(tmp_path, restrict=False)
    return ExecTool(fence, timeout=5, env={"PATH": os.defpath}, address_guard=guard, **options)


async def test_exec_allows_public_urls(tmp_path: Path) -> None:
    guard = AddressGuard(resolver=resolver({"example.com": [PUBLIC]}))
    tool = unfenced_exec(tmp_path, guard)
    assert await tool.execute(CTX, command="echo https://example.com") == (
        "https://example.com\nExit code: 0"
    )
    result = await tool.execute(CTX, command=f"echo http://{PUBLIC}/page")
    assert result.startswith(f"http://{PUBLIC}/page")


async def test_exec_lets_unresolvable_names_and_shell_built_hosts_run(tmp_path: Path) -> None:
    tool = unfenced_exec(tmp_path, AddressGuard(resolver=resolver({})))
    assert "Exit code: 0" in await tool.execute(CTX, command="echo http://nowhere.test/")
    assert "Exit code: 0" in await tool.execute(CTX, command="echo http://$HOST/x")


async def test_exec_with_allow_private_runs_internal_urls(tmp_path: Path) -> None:
    tool = unfenced_exec(tmp_path, allow_private=True)
    assert await tool.execute(CTX, command="echo http://127.0.0.1:8080/") == (
        "http://127.0.0.1:8080/\nExit code: 0"
    )


def test_urls_are_found_where_the_shell_would_end_them() -> None:
    assert urls_in("curl 'http://a.test/x?y=1'&& wget \"https://b.test:8443/\";echo HTTP://C") == [
        "http://a.test/x?y=1",
        "https://b.test:8443/",
        "HTTP://C",
    ]
