"""OpenAI's chat-completions wire protocol, spoken with aiohttp: the lean model path.

OpenAI itself and every OpenAI-compatible server (vLLM, Ollama, LM Studio, llama.cpp, …)
take the same request and stream the same server-sent events. Speaking it directly costs
a fraction of a millisecond per call and nothing at start-up, where a general-purpose SDK
costs seconds to import and a millisecond of work per streamed chunk. aiohttp parses HTTP
in C: a streamed chunk costs it about half of what it costs httpx, which matters when one
process relays fifty streams.
"""

from __future__ import annotations

import asyncio
import json
import logging
import weakref
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from agent import model_table

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
        self.session = aiohttp.ClientSession(
            # Many sessions stream at once through one process: no cap on connections.
            connector=aiohttp.TCPConnector(limit=0),
            # Proxies and certificate bundles from the environment, as other HTTP clients do.
            trust_env=True,
        )
        self.closer = self._closer()

    async def _closer(self) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
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


def target(
    model: str, *, api_base: str, api_key: str, openai_base: str, openai_key: str
) -> WireTarget:
    name = model.split("/", 1)[1] if model.startswith("openai/") else model
    if api_base:
        # Local servers (Ollama, LM Studio, llama.cpp) want no key, but some proxies refuse a
        # request without the header.
        return WireTarget(api_base.rstrip("/"), api_key or "no-key", name, model, openai=False)
    base = (openai_base or OPENAI_BASE_URL).rstrip("/")
    return WireTarget(base, api_key or openai_key, name, model, openai=True)


def request_body(
    wire: WireTarget,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    *,
    temperature: float,
    max_tokens: int,
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
        body["tool_choice"] = "auto"
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
        async with client.post(url, json=body, headers=headers, timeout=timeout) as response:
            if response.status >= 400:
                raise ProviderError(
                    _error_message(await response.text(), response),
                    status_code=response.status,
                    headers=response.headers,
                )
            if response.content_type == "application/json":
                # A server that ignored `stream`: its whole answer, as one chunk.
                yield _as_chunk(_json(await response.read()))
                return
            async for chunk in _events(response.content):
                yield chunk
    except aiohttp.ClientError as exc:
        raise ConnectionFailed(str(exc) or type(exc).__name__) from exc


async def _events(content: aiohttp.StreamReader) -> AsyncGenerator[Chunk, None]:
    data: list[bytes] = []
    finished = done = False
    async for raw in content:
        if done:
            continue  # read to the end, so that the connection goes back to the pool
        line = raw.rstrip(b"\r\n")
        if line.startswith(b"data:"):
            data.append(line[6:] if line.startswith(b"data: ") else line[5:])
            continue
        if line or not data:
            continue  # comments (": keep-alive"), event names, ids, blank keep-alives
        payload = b"\n".join(data)
        data.clear()
        if payload == b"[DONE]":
            done = True
            continue
        chunk = _json(payload)
        if "error" in chunk:
            raise _stream_error(chunk["error"])
        finished = finished or any(
            isinstance(choice, dict) and choice.get("finish_reason")
            for choice in chunk.get("choices") or ()
        )
        yield chunk
    if done:
        return
    if data and data != [b"[DONE]"]:
        yield _json(b"\n".join(data))
    elif not finished:
        # Closed cleanly but early (a proxy cut it off): not the whole answer.
        raise MalformedStream("the model's stream ended before its answer did")


def _json(payload: bytes) -> Chunk:
    try:
        value = json.loads(payload)
    except ValueError as exc:
        text = payload[:200].decode(errors="replace")
        raise MalformedStream(f"the model sent something that is not JSON: {text!r}") from exc
    if not isinstance(value, dict):
        text = payload[:200].decode(errors="replace")
        raise MalformedStream(f"the model sent an unexpected event: {text!r}")
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
    client = await session()
    try:
        async with client.get(
            f"{base_url.rstrip('/')}/models",
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=5.0),
            raise_for_status=True,
        ) as response:
            entries = (await response.json(content_type=None)).get("data", [])
    except (aiohttp.ClientError, TimeoutError, ValueError, AttributeError) as exc:
        logger.info("could not list the models of %s: %s", base_url, exc)
        return []
    return entries if isinstance(entries, list) else []
