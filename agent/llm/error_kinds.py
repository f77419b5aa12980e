"""How a model call failed: the kinds the loop acts on, read from whatever was raised.

The lean path raises errors with the server's status code and headers (`wire.ProviderError`)
and `ConnectionError`s for a broken stream or connection (`wire.MalformedStream`,
`wire.ConnectionFailed`); `classify` sorts those by status code, message and class. The
litellm path is sorted by `litellm_adapter.classify`, which reads litellm's exception
classes and hands what they say to `classify` here. Both adapters turn their HTTP client's
transport failures into `ConnectionError`.

What an `LLMError` says (`str()`) is what users read, in the chat, on the API, through the
OpenAI door and in the run record: a fixed phrase of ours for its kind (and, where it
helps, the HTTP status), never the provider's or a library's words. Those may carry
anything: a provider behind a proxy has answered with a database URL and its password, an
internal host name, litellm's dumps. They go to the server's log, and stay on the error as
`detail` for the code that logs it.
"""

from __future__ import annotations

import email.utils
import json
import logging
import re
import time
from typing import Literal

from agent.llm.wire import MalformedStream

logger = logging.getLogger(__name__)

ErrorKind = Literal["context_overflow", "auth", "bad_request", "transient", "unknown"]
# What an exception's class can settle before its status code: a provider's 400 says an
# overflow only through the class litellm gives it.
ClassKind = Literal["context_overflow", "auth", "transient"]

_OVERFLOW_HINTS = (
    "context length",
    "context_length",
    "context window",
    "maximum context",
    "too many tokens",
    "prompt is too long",
    "input is too long",
    "reduce the length",
)
# litellm stacks class names in front of the provider's words: "litellm.X: Y: OpenAIException - …".
_ERROR_PREFIXES = re.compile(r"^(?:(?:litellm\.)?\w+(?:Error|Exception)\s*[:-]\s*)+")

# How providers, and litellm before it sends anything, say that they do not know a model:
# litellm's "LLM Provider NOT provided … You passed model=7", OpenAI's and vLLM's "The model
# `x` does not exist", Ollama's 'model "x" not found', OpenRouter's "not a valid model ID".
_UNKNOWN_MODEL = re.compile(
    r"llm provider not provided|unmapped llm provider|model_not_found"
    r"|not a valid model|\b(?:unknown|unsupported|no such) model\b"
    r"|\bmodels?\b[^.\n]{0,120}?\b(?:not found|does not exist|not supported|is unknown)\b",
    re.IGNORECASE,
)

# What users read of each failure: `str()` of the `LLMError`.
CONTEXT_OVERFLOW = "the conversation no longer fits the model's context window"
AUTH_REFUSED = "the model provider did not accept the site's credentials"
NO_KEY = "no API key is set for the model provider"
REQUEST_REJECTED = "the model provider rejected the request"
UNKNOWN_MODEL = "the model id is not one the provider recognises"
TIMED_OUT = "the model server did not answer in time"
CONNECTION_FAILED = "the connection to the model server failed"
STREAM_BROKEN = "the model server's answer broke off or could not be read"
THROTTLED = "the model provider is limiting requests"
SERVER_FAILED = "the model server failed"
CALL_FAILED = "the model call failed"


class LLMError(Exception):
    """A model call that failed for good. `kind` is what the caller can act on."""

    def __init__(
        self,
        message: str,
        *,
        kind: ErrorKind,
        status: int | None = None,
        retry_after: float | None = None,
        detail: str | None = None,
    ) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.status = status
        self.retry_after = retry_after
        # What the provider or library said, when `message` puts it otherwise: for logs only.
        self.detail = detail or message

    @property
    def transient(self) -> bool:
        return self.kind == "transient"


def _retry_after(exc: BaseException) -> float | None:
    for source in ("litellm_response_headers", "headers", "response"):
        headers = getattr(exc, source, None)
        if source == "response":
            headers = getattr(headers, "headers", None)
        if not headers:
            continue
        try:
            if headers.get("retry-after-ms"):
                return float(headers["retry-after-ms"]) / 1000
            value = headers.get("retry-after")
        except (AttributeError, TypeError, ValueError):
            continue
        if not value:
            continue
        try:
            return float(value)
        except ValueError:
            pass
        try:  # an HTTP date
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None  # a header we cannot read: back off as if there were none
        return max(0.0, when.timestamp() - time.time())
    return None


def classify(
    exc: BaseException,
    *,
    known: ClassKind | None = None,
    default: ErrorKind = "unknown",
    said: str | None = None,
) -> LLMError:
    """Sort any failure of a model call into the kinds the loop knows how to handle.

    `known` is what the exception's class settles whatever its status; `default` is what
    its class says when neither the status code nor the message tells (a failure in
    mid-stream keeps the status of what broke, which says more than its class). `said` is
    what users read instead of the exception's words, when its class already tells.
    """
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    message = _short_message(exc)
    lowered = message.lower()

    def error(kind: ErrorKind) -> LLMError:
        public = said or _public_message(exc, kind, status)
        logger.warning("model call failed (%s, status %s): %s", kind, status, _full_message(exc))
        return LLMError(
            public, kind=kind, status=status, retry_after=_retry_after(exc), detail=message
        )

    if known == "context_overflow" or (
        status in (400, 413) and any(hint in lowered for hint in _OVERFLOW_HINTS)
    ):
        return error("context_overflow")
    # litellm's "… api_key … missing", and the lean path's own "no API key for …".
    missing_key = ("api_key" in lowered and "missing" in lowered) or lowered.startswith(
        "no api key"
    )
    if missing_key:
        said = said or NO_KEY
    if known == "auth" or status in (401, 403) or missing_key:
        return error("auth")
    # The wire's MalformedStream and ConnectionFailed are ConnectionErrors: worth a retry.
    if known == "transient" or isinstance(exc, TimeoutError | ConnectionError):
        return error("transient")
    if status is not None and (status == 408 or status == 409 or status == 429 or status >= 500):
        return error("transient")
    if status is not None and 400 <= status < 500:
        return error("bad_request")
    return error(default)


def _public_message(exc: BaseException, kind: ErrorKind, status: int | None) -> str:
    """What users read of a failure of `kind`: a phrase of ours, whatever the provider said."""
    if kind == "context_overflow":
        return CONTEXT_OVERFLOW
    if kind == "auth":
        return AUTH_REFUSED
    if kind in ("bad_request", "unknown") and _UNKNOWN_MODEL.search(_full_message(exc)):
        return UNKNOWN_MODEL
    if isinstance(exc, TimeoutError):
        return TIMED_OUT
    if isinstance(exc, MalformedStream):
        return STREAM_BROKEN
    if isinstance(exc, ConnectionError):
        return CONNECTION_FAILED
    if kind == "transient":
        phrase = THROTTLED if status == 429 else SERVER_FAILED
    elif kind == "bad_request":
        phrase = REQUEST_REJECTED
    else:
        phrase = CALL_FAILED
    return f"{phrase} (HTTP {status})" if status is not None else phrase


def _full_message(exc: BaseException) -> str:
    return (str(exc) or type(exc).__name__)[:2000]


def _short_message(exc: BaseException) -> str:
    """The provider's words without litellm's prefixes and debug trailers."""
    text = str(getattr(exc, "message", None) or exc) or type(exc).__name__
    text = _ERROR_PREFIXES.sub("", text)
    text = text.split("\nModel:", 1)[0].strip()
    try:  # some providers put a JSON error body in the message
        body = json.loads(text[text.index("{") :])
        text = body.get("error", {}).get("message") or text
    except (ValueError, AttributeError):
        pass
    return text[:500]
