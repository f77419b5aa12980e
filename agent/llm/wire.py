"""OpenAI's chat-completions wire protocol, spoken with aiohttp: the lean model path.

OpenAI itself and every OpenAI-compatible server (vLLM, Ollama, LM Studio, llama.cpp, …)
take the same request and stream the same server-sent events, which this module speaks
itself rather than through the `openai` SDK, and over aiohttp rather than httpx (the web
tools' client), because it costs less on every count measured. `bench/model_client.py`
(medians of 5 runs, 2,000-chunk replies, a two-core machine):

                          import   CPU per chunk   round trip
    this module           176 ms          7.9 µs      0.62 ms
    openai SDK (httpx)    573 ms         93.2 µs      3.53 ms
    this reader on httpx       -         16.3 µs      1.17 ms
    bare aiohttp SSE      179 ms          8.6 µs      0.63 ms
    bare httpx SSE        124 ms         14.0 µs      1.20 ms

In the product, this module on aiohttp costs daphne 9 µs of CPU per relayed chunk against
18 to 21 µs when ported to httpx (`bench/chunk_cpu.py`, product row), and a cold
`manage.py agent -m hello` 0.65 to 0.74 s against 0.81 to 0.89 s (`bench/cold_start.py
--only cli`, three runs each, taking turns): httpx imports faster alone, yet the command
line on it was slower in every run. The SDK is not kept: three times the import, twelve
times the CPU per chunk, six times the round trip. (The web tools stay on httpx, through
whose transport the network guard pins each connection; the MCP SDK brings httpx2.)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import urllib.parse
import urllib.request
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from agent.llm import model_table

logger = logging.getLogger(__name__)

OPENAI_BASE_URL = "https://api.openai.com/v1"
Chunk = dict[str, Any]


class _Pool:
    """The connection pool of one event loop, closed when that loop shuts down.

    An aiohttp session belongs to the loop it was made on, and a command line, a worker
    task or a test may each run a loop of its own. A loop closes its open asynchronous
    generators when it shuts down (`asyncio.run`, `asyncio.Runner` and asgiref's
    `async_to_sync` all do); `closer` is one, and closes the session then.
    """

    def __init__(self) -> None:
        # Many sessions stream at once through one process: no cap on connections. Not
        # `trust_env`: it would also send ~/.netrc credentials, which clash with the key.
        self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        self.closer = self._closer(asyncio.get_running_loop())

    async def _closer(self, loop: asyncio.AbstractEventLoop) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            # The pool refers to its loop (through this generator): forgetting it here is
            # what lets a loop that has run its course be collected.
            _pools.pop(loop, None)
            await self.session.close()


_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Pool] = weakref.WeakKeyDictionary()


async def session() -> aiohttp.ClientSession:
    loop = asyncio.get_running_loop()
    pool = _pools.get(loop)
    if pool is None or pool.session.closed:
        pool = _pools[loop] = _Pool()
        await pool.closer.__anext__()  # registered with the loop from here on
    return pool.session


class ProviderError(Exception):
    """An error the server answered with: its status, its words, its headers."""

    def __init__(
        self, message: str, *, status_code: int | None, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.headers = headers or {}


class MalformedStream(ConnectionError):
    """The stream broke off or carried something that is not an event: worth a retry."""


class ConnectionFailed(ConnectionError):
    """The server could not be reached, or the connection broke: worth a retry."""


@dataclass(frozen=True, slots=True)
class WireTarget:
    """Where the requests go and how they are shaped for that server."""

    base_url: str
    api_key: str
    model: str  # the name the server knows, without litellm's `openai/`
    table_model: str  # the litellm id, for the model table
    openai: bool  # OpenAI itself, which has renamed and dropped parameters for some models
    proxy: str | None = None


def _proxy_for(url: str) -> str | None:
    """The proxy the environment names for `url` (HTTPS_PROXY, NO_PROXY and the rest)."""
    parts = urllib.parse.urlsplit(url)
    if parts.hostname is None or urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme)


def target(
    model: str, *, api_base: str, api_key: str, openai_base: str, openai_key: str
) -> WireTarget:
    name = model.split("/", 1)[1] if model.startswith("openai/") else model
    base = base_url(api_base=api_base, openai_base=openai_base)
    if api_base:
        # Local servers (Ollama, LM Studio, llama.cpp) want no key, but some proxies refuse a
        # request without the header.
        key, openai = api_key or "no-key", False
    else:
        key, openai = api_key or openai_key, True
    return WireTarget(base, key, name, model, openai=openai, proxy=_proxy_for(base))


def base_url(*, api_base: str, openai_base: str) -> str:
    """Where the requests go: the configured server, or OpenAI (or OPENAI_BASE_URL)."""
    return (api_base or openai_base or OPENAI_BASE_URL).rstrip("/")


def without_credentials(url: str) -> str:
    """`url` without a user, password or query, which may hold a key."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        netloc = f"{host}:{parts.port}" if parts.port else host
    except ValueError:  # a port that is no number: the host says enough
        netloc = host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def request_body(
    wire: WireTarget,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    *,
    temperature: float,
    max_tokens: int,
    tool_choice: str | dict[str, Any] = "auto",
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": wire.model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if wire.openai:
        # OpenAI replaced max_tokens, which its reasoning models refuse, and those models
        # accept no temperature but their own.
        body["max_completion_tokens"] = max_tokens
        if not model_table.is_reasoning_model(wire.table_model):
            body["temperature"] = temperature
    else:
        body["max_tokens"] = max_tokens
        body["temperature"] = temperature
    if tools:
        body["tools"] = tools
        body["tool_choice"] = tool_choice
    return body


async def stream_chunks(
    wire: WireTarget, body: dict[str, Any], *, http_timeout: float
) -> AsyncGenerator[Chunk, None]:
    """POST the request and yield each streamed chunk as a dict."""
    if not wire.api_key:
        raise ProviderError(
            "no API key for OpenAI: set OPENAI_API_KEY or AGENT_API_KEY", status_code=401
        )
    headers = {"Authorization": f"Bearer {wire.api_key}"}
    url = f"{wire.base_url}/chat/completions"
    timeout = aiohttp.ClientTimeout(sock_connect=http_timeout, sock_read=http_timeout)
    client = await session()
    try:
        async with client.post(
            url, json=body, headers=headers, timeout=timeout, proxy=wire.proxy
        ) as response:
            if response.status >= 400:
                raise ProviderError(
                    _error_message(await response.text(errors="replace"), response),
                    status_code=response.status,
                    headers=response.headers,
                )
            if response.content_type == "application/json":
                # A server that ignored `stream`: its whole answer, as one chunk.
                yield _as_chunk(_event(await response.read()))
                return
            async with contextlib.aclosing(events(response.content.iter_any())) as chunks:
                async for chunk in chunks:
                    yield chunk
            await _drain(response.content)
    except aiohttp.ClientError as exc:
        raise ConnectionFailed(str(exc) or type(exc).__name__) from exc


# After [DONE], how long the rest of the body (its last empty chunk) may take to arrive
# before the connection is given up rather than kept for the next call.
DRAIN_SECONDS = 1.0


async def events(body: AsyncIterator[bytes]) -> AsyncGenerator[Chunk, None]:
    """The chunks of a body of server-sent events, as it arrives, up to its `[DONE]`."""
    data: list[bytes] = []
    finished = False
    async with contextlib.aclosing(_lines(body)) as lines:
        async for line in lines:
            if line.startswith(b"data:"):
                data.append(line[6:] if line.startswith(b"data: ") else line[5:])
                continue
            if line or not data:
                continue  # comments (": keep-alive"), event names, ids, blank keep-alives
            payload = b"\n".join(data)
            data.clear()
            if payload == b"[DONE]":
                return
            chunk = _event(payload)
            finished = finished or _finishes(chunk)
            yield chunk
    if data:  # the last event, without the blank line that ends it
        payload = b"\n".join(data)
        if payload == b"[DONE]":
            return
        chunk = _event(payload)
        finished = finished or _finishes(chunk)
        yield chunk
    if not finished:
        # Closed cleanly but early (a proxy cut it off): not the whole answer.
        raise MalformedStream("the model's stream ended before its answer did")


async def _lines(body: AsyncIterator[bytes]) -> AsyncGenerator[bytes, None]:
    """The body's lines without their endings, however long: a server may send a whole
    tool call, file contents and all, as one event."""
    pending: list[bytes] = []
    async for data in body:
        if b"\n" not in data:
            pending.append(data)
            continue
        pending.append(data)
        *lines, last = b"".join(pending).split(b"\n")
        pending = [last] if last else []
        for line in lines:
            yield line.removesuffix(b"\r")
    if pending:
        yield b"".join(pending).removesuffix(b"\r")


async def _drain(content: aiohttp.StreamReader) -> None:
    """Read to the end of the body (after `[DONE]`, its last empty chunk), so that the
    connection goes back to the pool."""
    with contextlib.suppress(TimeoutError, aiohttp.ClientError):
        async with asyncio.timeout(DRAIN_SECONDS):
            async for _ in content.iter_any():
                pass


def _finishes(chunk: Chunk) -> bool:
    return any(
        isinstance(choice, dict) and choice.get("finish_reason")
        for choice in chunk.get("choices") or ()
    )


def _event(payload: bytes) -> Chunk:
    """One event's JSON; the server's error if it is one."""
    try:
        # Bytes that are not UTF-8 (a server that cut a character in two) become U+FFFD
        # rather than spoiling the whole answer; what is left to clean, `client` cleans.
        value = json.loads(payload.decode("utf-8", "replace"))
    except ValueError as exc:
        text = payload[:200].decode(errors="replace")
        raise MalformedStream(f"the model sent something that is not JSON: {text!r}") from exc
    if not isinstance(value, dict):
        text = payload[:200].decode(errors="replace")
        raise MalformedStream(f"the model sent an unexpected event: {text!r}")
    if "error" in value:
        raise _stream_error(value["error"])
    return value


def _as_chunk(answer: Chunk) -> Chunk:
    choices = []
    for choice in answer.get("choices") or ():
        message = dict(choice.get("message") or {})
        calls = message.get("tool_calls") or []
        message["tool_calls"] = [{**call, "index": i} for i, call in enumerate(calls)]
        choices.append({"delta": message, "finish_reason": choice.get("finish_reason")})
    return {"choices": choices, "usage": answer.get("usage")}


def _stream_error(error: Any) -> ProviderError:
    """An error sent as an event after the stream began (OpenRouter, vLLM do this)."""
    if isinstance(error, dict):
        code = error.get("code")
        status = code if isinstance(code, int) else 500
        return ProviderError(str(error.get("message") or error), status_code=status)
    return ProviderError(str(error), status_code=500)


def _error_message(text: str, response: aiohttp.ClientResponse) -> str:
    text = text.strip()
    try:
        body = json.loads(text)
    except ValueError:
        return text[:500] or f"HTTP {response.status} {response.reason or ''}".strip()
    if isinstance(body, dict):
        error = body.get("error", body.get("detail", body.get("message")))
        if isinstance(error, dict):
            error = error.get("message") or error
        if error:
            return str(error)[:500]
    return text[:500]


async def served_models(base_url: str, api_key: str) -> list[Any]:
    """The server's /models list (vLLM, LM Studio and others tell each model's window)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    url = f"{base_url.rstrip('/')}/models"
    client = await session()
    try:
        async with client.get(
            url,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=5.0),
            raise_for_status=True,
            proxy=_proxy_for(url),
        ) as response:
            entries = (await response.json(content_type=None)).get("data", [])
    except (aiohttp.ClientError, TimeoutError, ValueError, AttributeError) as exc:
        logger.info("could not list the models of %s: %s", base_url, exc)
        return []
    return entries if isinstance(entries, list) else []
