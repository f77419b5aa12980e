"""Every failure of the web tools reaches the model as a sentence of ours: never an
exception's own text (a codec's, a resolver's, httpx's), nor words a server sent."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from agent.tools import ToolRegistry, WebSettings
from agent.tools.guards import AddressGuard
from agent.tools.web import WebFetchTool, WebSearchTool

# What the libraries say, which the model must not read.
RAW = (
    "idna",
    "codec",
    "UnicodeError",
    "label empty or too long",
    "Invalid",
    "Errno",
    "ConnectError",
    "RemoteProtocolError",
    "Name or service not known",
    "SSL",
    "Traceback",
    "reference",
)
LEAK = "postgres://admin:hunter2@10.1.2.3:5432/prod"


async def run(tool: Any, **arguments: Any) -> str:
    registry = ToolRegistry()
    registry.register(tool)
    return await registry.execute(tool.name, arguments)


def assert_plain(result: str) -> None:
    assert result.startswith("Error: "), result
    for words in RAW:
        assert words not in result, result


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def no_such_name(host: str, port: int) -> list[str]:
    raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")


def fetch_tool() -> WebFetchTool:
    return WebFetchTool(
        WebSettings(allow_private=True, timeout=5),
        guard=AddressGuard(allow_private=True, resolver=no_such_name),
    )


@pytest.mark.parametrize(
    ("url", "said"),
    [
        # A label past DNS's 63 characters: Python's IDNA codec refused it in the lookup.
        ("http://" + "a" * 70 + ".example/", "is not a valid host name"),
        ("http://" + "ä" * 70 + ".example/", "is not a valid URL"),
        ("http://exämple..com/", "is not a valid URL"),
        # An `xn--` name no IDNA rule allows: httpx only finds out as it sends.
        ("http://xn--a.example/", "is not a valid URL"),
        ("http://[::1/", "is not a valid URL"),
        ("http://\x00x/", "is not a valid URL"),
        ("http://nowhere.example/", "cannot resolve host 'nowhere.example': no such host name"),
        # Python's socket refuses a port past 65535 as it connects.
        ("http://127.0.0.1:99999/", "is not a valid URL: its port is past 65535"),
    ],
)
async def test_a_url_that_cannot_be_fetched_is_a_sentence(
    url: str, said: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agent.tools")
    result = await run(fetch_tool(), url=url)
    assert_plain(result)
    assert said in result, result


async def test_the_codecs_words_go_to_the_log(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agent.tools")
    result = await run(fetch_tool(), url="http://[::1/")
    assert_plain(result)
    assert "Invalid port" in caplog.text


async def test_a_closed_port_is_a_sentence() -> None:
    port = closed_port()
    result = await run(fetch_tool(), url=f"http://127.0.0.1:{port}/")
    assert_plain(result)
    assert result == (
        f"Error: could not fetch http://127.0.0.1:{port}/: the server could not be connected "
        "to (nothing answered, or it refused)"
    )


class Plain(BaseHTTPRequestHandler):
    """Answers `/odd-type` with an image whose type says more than a type, and everything
    else with an error whose reason phrase carries a secret."""

    protocol_version = "HTTP/1.1"

    def _answer(self) -> None:
        if self.path.startswith("/to/"):
            # Redirects to what no URL of the web can be: a host no IDNA rule allows, a port
            # past 65535.
            self.send_response(302)
            target = {"/to/xn": "http://xn--a.com/", "/to/port": "http://127.0.0.1:99999/"}
            self.send_header("Location", target[self.path])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path == "/odd-type":
            body = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
            self.send_response(200)
            self.send_header("Content-Type", f"image/png {LEAK}")
        else:
            body = b"nope"
            self.send_response(503, LEAK)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def plain_http() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Plain)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


async def test_tls_to_a_server_that_speaks_none_is_a_sentence(plain_http: int) -> None:
    result = await run(fetch_tool(), url=f"https://127.0.0.1:{plain_http}/")
    assert_plain(result)
    assert result.endswith("the TLS handshake with the server failed"), result


@pytest.mark.parametrize(
    ("path", "said"),
    [
        ("/to/xn", "answered with a redirect to an address that is not a valid URL"),
        ("/to/port", "'http://127.0.0.1:99999/' is not a valid URL: its port is past 65535"),
    ],
)
async def test_a_redirect_to_no_valid_url_is_a_sentence(
    plain_http: int, path: str, said: str
) -> None:
    result = await run(fetch_tool(), url=f"http://127.0.0.1:{plain_http}{path}")
    assert_plain(result)
    assert said in result, result


async def test_a_content_type_is_repeated_only_as_a_media_type(plain_http: int) -> None:
    result = await run(fetch_tool(), url=f"http://127.0.0.1:{plain_http}/odd-type")
    assert result.startswith("Error: ") and "web_fetch reads HTML, text and JSON only" in result
    assert "hunter2" not in result and "postgres" not in result, result


async def test_a_search_provider_that_cannot_be_reached_is_a_sentence() -> None:
    url = f"http://127.0.0.1:{closed_port()}/html/"
    result = await run(WebSearchTool(WebSettings(duckduckgo_url=url, timeout=5)), query="x")
    assert_plain(result)
    assert result.startswith("Error: web search failed: DuckDuckGo could not be reached (")


async def test_a_search_providers_reason_phrase_is_not_repeated(plain_http: int) -> None:
    url = f"http://127.0.0.1:{plain_http}/html/"
    result = await run(WebSearchTool(WebSettings(duckduckgo_url=url, timeout=5)), query="x")
    assert result == "Error: DuckDuckGo answered HTTP 503 Service Unavailable; try again later"


async def test_a_search_result_whose_link_does_not_parse_is_skipped() -> None:
    from agent.tools.webtext import duckduckgo_results

    page = (
        '<div class="result"><a class="result__a" href="http://[::1/x">broken</a></div>'
        '<div class="result"><a class="result__a" href="https://ok.example/">ok</a></div>'
    )
    assert [r.url for r in duckduckgo_results(page)] == ["https://ok.example/"]
