"""OpenAI's chat-completions wire protocol, spoken with httpx: the lean model path.

OpenAI itself and every OpenAI-compatible server (vLLM, Ollama, LM Studio, llama.cpp, …)
take the same request and stream the same server-sent events. Speaking it directly costs
a fraction of a millisecond per call and nothing at start-up, where a general-purpose SDK
costs seconds to import and a millisecond of work per streamed chunk.
"""

from __future__ import annotations

import asyncio
import json
import logging
import weakref
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

import httpx

from agent import model_table

logger = logging.getLogger(__name__)

OPENAI_BASE_URL = "https://api.openai.com/v1"
Chunk = dict[str, Any]

# One connection pool per event loop: an httpx client belongs to the loop it first ran on,
# and a command line, a test or a worker task may each run its own loop.
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
    weakref.WeakKeyDictionary()
)


def client() -> httpx.AsyncClient:
    loop = asyncio.get_running_loop()
    found = _clients.get(loop)
    if found is None or found.is_closed:
        found = _clients[loop] = httpx.AsyncClient(
            # Many sessions stream at once through one process: no cap on connections, and
            # enough kept alive that a busy process does not reconnect for every call.
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
        )
    return found


class ProviderError(Exception):
    """An error the server answered with: its status, its words, its headers."""

    def __init__(
        self, message: str, *, status_code: int | None, headers: httpx.Headers | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.headers = headers or httpx.Headers()


class MalformedStream(ConnectionError):
    """The stream broke off or carried something that is not an event: worth a retry."""


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
    async with client().stream(
        "POST", url, json=body, headers=headers, timeout=http_timeout
    ) as response:
        if response.status_code >= 400:
            await response.aread()
            raise ProviderError(
                _error_message(response), status_code=response.status_code, headers=response.headers
            )
        if response.headers.get("content-type", "").startswith("application/json"):
            # A server that ignored `stream`: its whole answer, as one chunk.
            await response.aread()
            yield _as_chunk(_json(response.text))
            return
        async for chunk in _events(response):
            yield chunk


async def _events(response: httpx.Response) -> AsyncGenerator[Chunk, None]:
    data: list[str] = []
    finished = done = False
    async for line in response.aiter_lines():
        if done:
            continue  # read to the end, so that the connection goes back to the pool
        if line.startswith("data:"):
            data.append(line[6:] if line.startswith("data: ") else line[5:])
            continue
        if line or not data:
            continue  # comments (": keep-alive"), event names, ids, blank keep-alives
        payload = "\n".join(data)
        data.clear()
        if payload == "[DONE]":
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
    if data and data != ["[DONE]"]:
        yield _json("\n".join(data))
    elif not finished:
        # Closed cleanly but early (a proxy cut it off): not the whole answer.
        raise MalformedStream("the model's stream ended before its answer did")


def _json(payload: str) -> Chunk:
    try:
        value = json.loads(payload)
    except ValueError as exc:
        raise MalformedStream(
            f"the model sent something that is not JSON: {payload[:200]!r}"
        ) from exc
    if not isinstance(value, dict):
        raise MalformedStream(f"the model sent an unexpected event: {payload[:200]!r}")
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


def _error_message(response: httpx.Response) -> str:
    text = response.text.strip()
    try:
        body = json.loads(text)
    except ValueError:
        return text[:500] or f"HTTP {response.status_code} {response.reason_phrase}"
    if isinstance(body, dict):
        error = body.get("error", body.get("detail", body.get("message")))
        if isinstance(error, dict):
            error = error.get("message") or error
        if error:
            return str(error)[:500]
    return text[:500]
