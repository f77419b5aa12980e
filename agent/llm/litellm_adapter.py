"""Every provider that does not speak OpenAI's wire protocol, through litellm.

Anthropic, Gemini, Bedrock, Ollama's own API, OpenRouter and the rest. This is the only
module that imports litellm, and only once such a model is used: the import alone takes
seconds.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

from agent.llm import error_kinds

if TYPE_CHECKING:
    from types import ModuleType

logger = logging.getLogger(__name__)

_litellm: ModuleType | None = None
_import_lock = threading.Lock()


def load() -> ModuleType:
    global _litellm
    with _import_lock:
        if _litellm is None:
            import litellm

            litellm.suppress_debug_info = True
            litellm.drop_params = True
            _litellm = litellm
    return _litellm


def preload() -> None:
    """Import litellm in the background, so that a server's first turn does not wait."""
    threading.Thread(target=load, name="litellm-import", daemon=True).start()


def request_kwargs(
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    *,
    api_base: str,
    api_key: str,
    temperature: float,
    max_tokens: int,
    timeout: float,
    tool_choice: str | dict[str, Any] = "auto",
) -> dict[str, Any]:
    request: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "temperature": temperature,
        "max_tokens": max_tokens,
        "timeout": timeout,
        # Retries are the adapter's, with backoff and a budget; the SDKs must not add theirs.
        "max_retries": 0,
        "num_retries": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if tools:
        request["tools"] = tools
        request["tool_choice"] = tool_choice
    if api_base:
        request["api_base"] = api_base
    if api_key:
        request["api_key"] = api_key
    elif api_base:
        # Local servers want no key, but the OpenAI client refuses to start without one.
        request["api_key"] = "no-key"
    return request


async def stream_chunks(request: dict[str, Any]) -> AsyncGenerator[Any, None]:
    import httpx  # litellm's own HTTP client, loaded with it

    try:
        stream = await load().acompletion(**request)
        async for chunk in stream:
            yield chunk
    except httpx.TransportError as exc:  # the few that litellm lets through unwrapped
        raise ConnectionError(str(exc) or type(exc).__name__) from exc


def classify(exc: BaseException) -> error_kinds.LLMError:
    """Sort a failure on this path by the class litellm maps each provider's failure onto,
    then by status code and message as on the lean path."""
    litellm = _litellm
    if litellm is None:  # litellm failed to import: nothing here came from it
        return error_kinds.classify(exc)
    import openai  # litellm's own dependency, loaded with it

    known: error_kinds.ClassKind | None = None
    default: error_kinds.ErrorKind = "unknown"
    # What users read when the class tells: a connection failure's text names hosts and
    # Python objects ("Cannot connect to host … ssl:<ssl.SSLContext object at 0x…>").
    said: str | None = None
    if isinstance(exc, litellm.ContextWindowExceededError):
        known = "context_overflow"
    elif isinstance(exc, litellm.AuthenticationError | litellm.PermissionDeniedError):
        known = "auth"
    # openai's APIConnectionError is the base of litellm's Timeout and APIConnectionError,
    # and of the SDK's own when one gets through unwrapped.
    elif isinstance(exc, litellm.RateLimitError | openai.APIConnectionError):
        known = "transient"
        if isinstance(exc, openai.APITimeoutError):  # litellm's Timeout among them
            said = error_kinds.TIMED_OUT
        elif isinstance(exc, openai.APIConnectionError):
            said = error_kinds.CONNECTION_FAILED
    elif isinstance(
        exc, litellm.BadRequestError | litellm.NotFoundError | litellm.UnprocessableEntityError
    ):
        default = "bad_request"
    # MidStreamFallbackError is a ServiceUnavailableError that keeps the status of the
    # failure it wraps: a 400 in mid-stream stays a bad request.
    elif isinstance(exc, litellm.ServiceUnavailableError | litellm.InternalServerError):
        default = "transient"
    return error_kinds.classify(exc, known=known, default=default, said=said)


def cost(model: str, usage: dict[str, int]) -> float | None:
    try:
        prompt_cost, completion_cost = load().cost_per_token(
            model=model,
            prompt_tokens=usage.get("prompt_tokens", 0),
            completion_tokens=usage.get("completion_tokens", 0),
        )
    except Exception:  # litellm raises for models it has no price for
        return None
    total = float(prompt_cost) + float(completion_cost)
    return total if total > 0 else None


def supported_params(model: str) -> list[str] | None:
    """The OpenAI parameters litellm passes on to `model`'s provider; None: it cannot say."""
    litellm = load()
    try:
        provider = litellm.get_llm_provider(model)[1]
        supported = litellm.get_supported_openai_params(model=model, custom_llm_provider=provider)
    except Exception as exc:  # an unknown provider: the provider's own answer will say
        logger.info("litellm cannot say what %s takes: %s", model, exc)
        return None
    return list(supported) if supported is not None else None


def context_window(model: str) -> int | None:
    try:
        info = load().get_model_info(model)
    except Exception:  # unmapped models (local servers, new releases) are expected
        return None
    value = info.get("max_input_tokens") or info.get("max_tokens")
    return int(value) if value else None
