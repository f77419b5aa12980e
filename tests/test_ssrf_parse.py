"""One parse of a URL for the network guard and the client: web_fetch reads the host once,
in the spelling a connection would use, and the guard checks that very host at connect
time. Every attack here runs against a real server on 127.0.0.1 that records each
connection, with a resolver that answers a public address for the benign name
(`example.com`): only a parser that read one host for the check and another for the
connection could reach the server, and none does."""

from __future__ import annotations

import ipaddress
import socket
import string
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import quote, urlencode

import pytest

from agent.tools import ToolRegistry, WebSettings
from agent.tools.guards import AddressGuard, GuardError, IPAddress, address_problem
from agent.tools.guards.network import canonical_host
from agent.tools.web import WebFetchTool
from agent.tools.webhttp import fetchable_url
from tests.test_ssrf import resolver
from tests.test_web_tools import WebServer

PUBLIC = "93.184.215.14"
ALLOWED = ipaddress.ip_address("127.0.0.2")


class Tripwire:
    """An HTTP server that records every connection made to it (not just every request)
    and answers with a secret."""

    def __init__(self, host: str, port: int = 0) -> None:
        self.hits: list[Any] = []
        tripwire = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(b"internal secret")

        class Server(ThreadingHTTPServer):
            address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
            daemon_threads = True

            def process_request(self, request: Any, client_address: Any) -> None:
                tripwire.hits.append(client_address)
                super().process_request(request, client_address)

        self._server = Server((host, port), Handler)
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Tripwire:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture(scope="module")
def tripwire() -> Iterator[Tripwire]:
    with Tripwire("127.0.0.1") as running:
        yield running


@pytest.fixture(scope="module")
def tripwire6(tripwire: Tripwire) -> Iterator[Tripwire | None]:
    """The same port on ::1, where the machine has IPv6 loopback."""
    try:
        server = Tripwire("::1", tripwire.port)
    except OSError:
        yield None
        return
    with server:
        yield server


@pytest.fixture(scope="module")
def benign() -> Iterator[WebServer]:
    """A server on 127.0.0.2, which the tests' policy lets through as if it were public."""
    with WebServer("127.0.0.2") as running:
        yield running


def public_or_127_0_0_2(ip: IPAddress) -> bool:
    return ip == ALLOWED or address_problem(ip) is None


def fetch_tool(**table: list[str]) -> tuple[WebFetchTool, Any]:
    """web_fetch with a resolver that answers `PUBLIC` for example.com, 127.0.0.1 for
    localhost (and ``table``)."""
    lookup = resolver({"example.com": [PUBLIC], "localhost": ["127.0.0.1"], **table})
    guard = AddressGuard(is_allowed=public_or_127_0_0_2, resolver=lookup)
    return WebFetchTool(WebSettings(timeout=5), guard=guard), lookup


async def fetch(tool: WebFetchTool, url: str) -> str:
    registry = ToolRegistry()
    registry.register(tool)
    return await registry.execute("web_fetch", {"url": url})


# (URL, what the error says). `{port}` is the tripwire's.
ATTACKS = [
    ("http://127.0.0.1:{port}\\@example.com/", "user name or password before its host"),
    ("http://user:pass@127.0.0.1:{port}/", "user name or password before its host"),
    ("http://example.com@127.0.0.1:{port}/", "user name or password before its host"),
    ("http://example.com:80@127.0.0.1:{port}/", "user name or password before its host"),
    ("http://127.0.0.1%2f@example.com:{port}/", "user name or password before its host"),
    ("http://%31%32%37.0.0.1:{port}/", "127.0.0.1 is a loopback address"),
    ("http://127.0.0.%31:{port}/", "127.0.0.1 is a loopback address"),
    # httpx refuses what IDNA 2008 does not allow; the escaped forms it passes on are read
    # as a resolver would read them.
    ("http://１２７.０.０.１:{port}/", "is not a valid URL"),
    ("http://ⓛocalhost:{port}/", "is not a valid URL"),
    ("http://%EF%BC%91%EF%BC%92%EF%BC%97.0.0.1:{port}/", "127.0.0.1 is a loopback address"),
    ("http://%E2%93%9Bocalhost:{port}/", "localhost (127.0.0.1) is a loopback address"),
    ("http://2130706433:{port}/", "127.0.0.1 is a loopback address"),
    ("http://0x7f.1:{port}/", "127.0.0.1 is a loopback address"),
    ("http://0x7F000001:{port}/", "127.0.0.1 is a loopback address"),
    ("http://127.1:{port}/", "127.0.0.1 is a loopback address"),
    ("http://[::1]:{port}/", "::1 is a loopback address"),
    ("http://[::ffff:127.0.0.1]:{port}/", "is a loopback (IPv4 127.0.0.1 embedded in IPv6)"),
    ("http://[::ffff:7f00:1]:{port}/", "is a loopback (IPv4 127.0.0.1 embedded in IPv6)"),
    ("http://example.com\\@127.0.0.1:{port}/", "user name or password before its host"),
    ("http://127.0.0.1\\.example.com:{port}/", "not a valid host name"),
    ("http://exa mple.com@127.0.0.1:{port}/", "user name or password before its host"),
]


@pytest.mark.parametrize(("url", "error"), ATTACKS)
async def test_a_url_that_disguises_its_host_never_reaches_it(
    tripwire: Tripwire, tripwire6: Tripwire | None, url: str, error: str
) -> None:
    tool, lookup = fetch_tool()
    result = await fetch(tool, url.format(port=tripwire.port))
    assert result.startswith("Error: ") and error in result, result
    assert "internal secret" not in result
    assert tripwire.hits == []
    assert tripwire6 is None or tripwire6.hits == []
    # Refused on what the URL says: the public answer for example.com was never asked for.
    assert "example.com" not in lookup.calls


@pytest.mark.parametrize(("url", "error"), ATTACKS)
async def test_a_redirect_that_disguises_its_host_never_reaches_it(
    benign: WebServer, tripwire: Tripwire, tripwire6: Tripwire | None, url: str, error: str
) -> None:
    """Each hop of a redirect is read and checked as the first URL is."""
    tool, _ = fetch_tool()
    # A header is Latin-1: a server sends other characters escaped, which reads the same.
    target = quote(url.format(port=tripwire.port), safe=string.printable)
    if not url.isascii():
        error = "127.0.0.1 is a loopback address" if "１" in url else "localhost (127.0.0.1)"
    result = await fetch(tool, benign.url("/to") + "?" + urlencode({"url": target}))
    assert result.startswith("Error: ") and error in result, result
    assert tripwire.hits == []
    assert tripwire6 is None or tripwire6.hits == []


async def test_the_name_checked_is_the_name_connected_to_and_sent(benign: WebServer) -> None:
    """An escaped name is looked up, connected to and named in `Host` as one and the same
    name: its plain spelling."""
    tool, lookup = fetch_tool(**{"benign.test": ["127.0.0.2"]})
    result = await fetch(tool, f"http://BENIGN.%74est:{benign.port}/text")
    assert "line one" in result
    assert lookup.calls == ["benign.test"]
    assert benign.seen[-1].headers["Host"] == f"benign.test:{benign.port}"


async def test_a_benign_name_that_resolves_to_loopback_is_refused(tripwire: Tripwire) -> None:
    """The other half of the check: a name is judged by the address it resolves to."""
    tool, _ = fetch_tool(**{"inside.test": ["127.0.0.1"]})
    result = await fetch(tool, f"http://inside.test:{tripwire.port}/")
    assert result.startswith("Error: inside.test (127.0.0.1) is a loopback address")
    assert tripwire.hits == []


@pytest.mark.parametrize(
    ("host", "canonical"),
    [
        ("%31%32%37.0.0.1", "127.0.0.1"),
        ("１２７.０.０.１", "127.0.0.1"),
        ("ⓛocalhost", "localhost"),
        ("ＬＯＣＡＬＨＯＳＴ", "localhost"),
        ("2130706433", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("[::ffff:127.0.0.1]", str(ipaddress.ip_address("::ffff:7f00:1"))),
        ("[::1]", "::1"),
        ("Exa%6dple.COM", "example.com"),
        ("bücher.example", "xn--bcher-kva.example"),
        ("example.com.", "example.com."),
    ],
)
def test_hosts_are_read_as_a_connection_reads_them(host: str, canonical: str) -> None:
    assert canonical_host(host) == canonical


@pytest.mark.parametrize(
    "host", ["a\\b", "user@host", "a/b", "a b", "%00.example", "%ff.example", "a..b", ""]
)
def test_hosts_no_connection_could_use_are_refused(host: str) -> None:
    with pytest.raises(GuardError, match="not a valid host name"):
        canonical_host(host)


async def test_the_guard_reads_escaped_hosts_before_it_judges_them() -> None:
    """A client that hands the guard a host still escaped gets it judged by what it means."""
    guard = AddressGuard(resolver=resolver({"example.com": [PUBLIC]}))
    with pytest.raises(GuardError, match=r"^127\.0\.0\.1 is a loopback address"):
        await guard.resolve("%31%32%37.0.0.1", 80)
    with pytest.raises(GuardError, match=r"^127\.0\.0\.1 is a loopback address"):
        await guard.resolve("１２７.０.０.１", 80)
    assert [str(ip) for ip in await guard.resolve("EXAMPLE.%63om", 80)] == [PUBLIC]


def test_the_url_object_carries_the_checked_host() -> None:
    url = fetchable_url("http://0x7f.1:8080/a%2Fb?q=%31#frag")
    assert (url.host, url.port, url.raw_path) == ("127.0.0.1", 8080, b"/a%2Fb?q=%31")
    assert fetchable_url("https://exa%6Dple.com/").host == "example.com"
    with pytest.raises(GuardError, match="user name or password"):
        fetchable_url("//user@127.0.0.1/", base=fetchable_url("http://example.com/"))


@pytest.mark.parametrize(
    "command",
    [
        "curl http://%31%32%37.0.0.1:8080/",
        "curl http://１２７.０.０.１/",
        "curl http://ⓛocalhost/",
        "curl 'http://127.0.0.1:8080\\@example.com/'",
    ],
)
async def test_exec_reads_escaped_and_unicode_hosts_too(command: str) -> None:
    guard = AddressGuard(resolver=resolver({"example.com": [PUBLIC], "localhost": ["127.0.0.1"]}))
    with pytest.raises(GuardError, match=r"command refused: .* loopback address"):
        await guard.check_command_urls(command)
