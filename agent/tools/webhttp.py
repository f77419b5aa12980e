"""HTTP for the web tools: an httpx client whose every connection goes to an address the
network guard checked, and a download with redirects followed by hand, a size cap and
a content-type gate.

Imported on the first web tool call, never with `agent.tools`: httpx and httpcore cost a
command-line start more than the whole tool package.
"""

from __future__ import annotations

import logging
import re
import ssl
import zlib
from dataclasses import dataclass
from typing import Any

import httpcore
import httpx

from agent.tools.base import ToolError
from agent.tools.guards import AddressGuard, GuardError
from agent.tools.guards.network import canonical_host
from agent.tools.guards.pinned_http import guarded_transport, ssl_context

logger = logging.getLogger(__name__)

MAX_REDIRECTS = 5
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# The most of a URL a message to the model repeats.
SHOWN_URL_CHARS = 200
# What of a server's header a message to the model repeats: a name, or a media type.
_TOKEN = re.compile(r"[a-z0-9][a-z0-9._+-]{0,31}")
_MEDIA_TYPE = re.compile(r"[a-z0-9][a-z0-9._+-]{0,63}/[a-z0-9][a-z0-9._+-]{0,63}")


def guarded_client(guard: AddressGuard, *, timeout: float, user_agent: str) -> httpx.AsyncClient:
    """A client for one web_fetch call.

    One per call rather than one per process: an httpx client (its pool's sockets and
    locks) belongs to the event loop it first ran on, and turns run on several loops
    (daphne's, `asyncio.run` per CLI turn, a fresh one per django-q2 task). A fetch is one
    page and its redirects, so a pool kept between calls would save little; the costly
    part, the TLS context, is shared. ``trust_env=False``: a proxy from the environment
    would connect on our behalf and so bypass the guard.
    """
    return httpx.AsyncClient(
        transport=guarded_transport(httpx, httpcore, guard, max_connections=4),
        trust_env=False,
        follow_redirects=False,
        timeout=httpx.Timeout(timeout),
        headers={"User-Agent": user_agent},
    )


def plain_client(*, timeout: float, user_agent: str) -> httpx.AsyncClient:
    """A client for the search providers, whose addresses are the administrator's settings
    and so not guarded. One per call, for the same event-loop reason as above."""
    return httpx.AsyncClient(
        trust_env=False,
        verify=ssl_context(httpx),
        follow_redirects=True,
        max_redirects=3,
        timeout=httpx.Timeout(timeout),
        headers={"User-Agent": user_agent},
    )


@dataclass(frozen=True, slots=True)
class Download:
    """What a fetch brought back: the final URL after redirects and at most the size cap
    of the (decoded) body."""

    url: str
    status: int
    reason: str
    content_type: str
    charset: str | None
    body: bytes
    cut: bool  # the body went on past the cap


_TEXT_TYPES = frozenset(
    {
        "application/json", "application/xml", "application/xhtml+xml", "application/javascript",
        "application/ecmascript", "application/x-javascript", "application/x-ndjson",
        "application/ld+json", "application/rss+xml", "application/atom+xml",
        "application/x-yaml", "application/yaml", "application/toml", "application/csv",
    }
)  # fmt: skip


def readable_type(content_type: str) -> bool | None:
    """Whether a media type is text the tool can show: True, False, or None when only the
    bytes can tell (no type, or a generic one)."""
    if not content_type or content_type in {"application/octet-stream", "binary/octet-stream"}:
        return None
    if content_type.startswith("text/") or content_type in _TEXT_TYPES:
        return True
    return content_type.endswith(("+json", "+xml"))


def looks_binary(sample: bytes) -> bool:
    """NUL bytes in the first kilobyte: text formats do not have them."""
    return b"\x00" in sample[:1024]


async def download(
    client: httpx.AsyncClient,
    url: str,
    *,
    max_bytes: int,
    headers: dict[str, str] | None = None,
    binary: bool = False,
) -> Download:
    """GET ``url``, following at most `MAX_REDIRECTS` redirects, each hop read by
    `fetchable_url` here and its host checked by the client's transport when it connects.
    `binary`: any file is read (an image a client sent by URL); otherwise only text is."""
    current = fetchable_url(url)
    for _ in range(MAX_REDIRECTS + 1):
        request = client.build_request(
            "GET", current, headers={"Accept-Encoding": "gzip, deflate", **(headers or {})}
        )
        try:
            response = await client.send(request, stream=True)
        except (UnicodeError, ValueError) as exc:
            # httpx reads a redirect's target as it receives the answer, whether it follows
            # it or not: a target whose host no IDNA rule allows fails there.
            logger.info("web_fetch of %s failed on what the server answered: %r", current, exc)
            raise ToolError(
                f"{shown_url(str(current))} answered with a redirect to an address that is not "
                "a valid URL"
            ) from None
        try:
            location = response.headers.get("location")
            if response.status_code in _REDIRECT_STATUSES and location:
                current = fetchable_url(location, base=response.url)
                logger.info("web_fetch redirected to %s", current)
                continue
            return await _read(response, max_bytes, binary=binary)
        finally:
            await response.aclose()
    raise ToolError(f"too many redirects (more than {MAX_REDIRECTS}); stopped at {current}")


def fetchable_url(url: str, *, base: httpx.URL | None = None) -> httpx.URL:
    """``url`` (resolved against ``base``, for a redirect) parsed once, the one object both
    the request and the guard read the host from.

    The host comes back in the spelling `canonical_host` gives it, so what the guard
    checks, what the connection reaches and the `Host` header are one name or address.
    A user name or password before the host (``user@host``) is refused: web_fetch sends no
    credentials, and it is how a URL like ``http://127.0.0.1:80\\@example.com/`` reads
    one host to one parser and another to the next.
    """
    try:
        parsed = base.join(url) if base is not None else httpx.URL(url)
        # httpx decodes an `xn--` name only when the host is first read, on sending: read
        # here, a name no IDNA rule allows fails now, with the other malformed URLs.
        parsed.host  # noqa: B018
    except (httpx.InvalidURL, TypeError, UnicodeError, ValueError) as exc:
        logger.info("web_fetch refused the URL %r: %s", url, exc)
        raise ToolError(
            f"{shown_url(url)} is not a valid URL: check its host name and port"
        ) from None
    if parsed.scheme not in {"http", "https"}:
        raise GuardError(f"only http and https URLs can be fetched, not {url}")
    if parsed.userinfo:
        raise GuardError(
            f"{url} has a user name or password before its host (user@host); web_fetch "
            "does not fetch such URLs"
        )
    if not parsed.raw_host:
        raise ToolError(f"{shown_url(url)} is not a valid URL: it has no host")
    if parsed.port is not None and not 0 < parsed.port < 65536:
        raise ToolError(f"{shown_url(url)} is not a valid URL: its port is past 65535")
    host = canonical_host(parsed.raw_host.decode("ascii"))
    if host != parsed.raw_host.decode("ascii"):
        parsed = parsed.copy_with(host=host)
    return parsed.copy_with(fragment=None)


async def _read(response: httpx.Response, max_bytes: int, *, binary: bool = False) -> Download:
    content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    # A file of any kind is what a caller that takes `binary` wants.
    readable = True if binary else readable_type(content_type)
    if readable is False:
        raise ToolError(_binary_refusal(content_type, response))
    decoder = _decoder(response)
    body = bytearray()
    cut = False
    # Raw bytes, unpacked here a bounded amount at a time: httpx would unpack each chunk
    # whole, and a few kilobytes of nested gzip make gigabytes.
    async for raw in response.aiter_raw():
        try:
            chunk = decoder.decompress(raw, max_bytes - len(body) + 1) if decoder else raw
        except zlib.error:
            raise ToolError(f"{response.url} sent a body that does not unpack") from None
        if readable is None and not body and looks_binary(chunk):
            raise ToolError(_binary_refusal(content_type or "binary data", response))
        body += chunk
        if len(body) > max_bytes:
            # The rest is never read: closing the response drops the connection.
            del body[max_bytes:]
            cut = True
            break
    return Download(
        url=str(response.url),
        status=response.status_code,
        reason=response.reason_phrase,
        content_type=content_type,
        charset=response.charset_encoding,
        body=bytes(body),
        cut=cut,
    )


def _decoder(response: httpx.Response) -> Any:
    """The unpacker for the response's `Content-Encoding` (None for none); one of gzip or
    deflate, not stacked, is all a page needs and all `download` asks for."""
    encodings = [
        word.strip().lower()
        for word in response.headers.get("content-encoding", "").split(",")
        if word.strip().lower() not in ("", "identity")
    ]
    if not encodings:
        return None
    if len(encodings) > 1 or encodings[0] not in ("gzip", "x-gzip", "deflate"):
        # The server's own words: shown only as far as they are encoding names.
        named = [word for word in encodings[:4] if _TOKEN.fullmatch(word)]
        raise ToolError(
            f"{response.url} is sent with an encoding web_fetch does not read "
            f"({', '.join(named) or 'unnamed'})"
        )
    return zlib.decompressobj(zlib.MAX_WBITS | (16 if "gzip" in encodings[0] else 0))


def _binary_refusal(content_type: str, response: httpx.Response) -> str:
    # Header values are the server's words: a media type and a size, or nothing of them.
    if not _MEDIA_TYPE.fullmatch(content_type) and content_type != "binary data":
        content_type = "a media type that is not named plainly"
    size = response.headers.get("content-length", "")
    what = f"{content_type}, {size} bytes" if size.isdigit() and len(size) < 16 else content_type
    return (
        f"{response.url} is not a web page or text ({what}); web_fetch reads HTML, "
        "text and JSON only"
    )


def shown_url(url: str | httpx.URL) -> str:
    """`url` quoted for a message, cut short when it is long."""
    text = str(url)
    if len(text) > SHOWN_URL_CHARS:
        text = text[: SHOWN_URL_CHARS - 1] + "…"
    return repr(text)


def failure_reason(exc: BaseException) -> str:
    """Why a request failed, in words of ours. An exception's own text names addresses,
    library internals and codecs ("encoding with 'idna' codec failed"), which tell the model
    nothing it can act on: it goes to the log instead."""
    if isinstance(exc, httpx.ConnectError):
        tls = _tls_failure(exc)
        if isinstance(tls, ssl.SSLCertVerificationError):
            return "the server's TLS certificate could not be verified"
        if tls is not None:
            return "the TLS handshake with the server failed"
        return "the server could not be connected to (nothing answered, or it refused)"
    if isinstance(exc, httpx.RemoteProtocolError):
        return "the server closed the connection without a proper HTTP answer"
    if isinstance(exc, httpx.TooManyRedirects):
        return "it redirected too many times"
    if isinstance(exc, httpx.UnsupportedProtocol):
        return "only http and https URLs can be fetched"
    if isinstance(exc, httpx.DecodingError):
        return "the server sent a body that could not be decoded"
    if isinstance(exc, httpx.InvalidURL):
        return "the URL is not valid"
    if isinstance(exc, httpx.NetworkError | httpx.ProtocolError):
        return "the connection broke off"
    return "the request failed"


def _tls_failure(exc: BaseException) -> ssl.SSLError | None:
    """The TLS error among the causes of `exc`, if one is."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ssl.SSLError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None
