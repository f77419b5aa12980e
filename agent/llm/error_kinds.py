"""How a model call failed: the kinds the loop acts on, read from whatever was raised.

The lean path raises errors with the server's status code and headers (`wire.ProviderError`)
and `ConnectionError`s for a broken stream or connection (`wire.MalformedStream`,
`wire.ConnectionFailed`); `classify` sorts those by status code, message and class. The
litellm path is sorted by `litellm_adapter.classify`, which reads litellm's exception
classes and hands what they say to `classify` here. Both adapters turn their HTTP client's
transport failures into `ConnectionError`.

What an `LLMError` says (`str()`) is what users read, in the chat, on the API and in the
run record. A provider's own short words about a request it refused are shown: they are
written for its API's users and say what to fix. Everything else is put in a plain phrase
and the original goes to the log: an id the provider (or litellm, before any request) does
not recognise, a connection that failed (its text names hosts and Python objects), and any
text that looks like a library's dump (several lines, URLs, object reprs, litellm's words).
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
# Text that is a library's dump rather than a provider's sentence.
_DUMP = re.compile(
    r"litellm|traceback|\n|https?://|\bat 0x[0-9a-f]+|<[\w.]+ object\b|<\s*(?:html|!doctype|body)",
    re.IGNORECASE,
)
_SHOWN_CHARS = 300

UNKNOWN_MODEL = "the model id is not one the provider recognises"
TIMED_OUT = "the model server did not answer in time"
CONNECTION_FAILED = "the connection to the model server failed"


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
        public = said or _public_message(exc, message, kind, status)
        if public != message:
            logger.warning(
                "model call failed (%s, status %s): %s", kind, status, _full_message(exc)
            )
        return LLMError(
            public, kind=kind, status=status, retry_after=_retry_after(exc), detail=message
        )

    if known == "context_overflow" or (
        status in (400, 413) and any(hint in lowered for hint in _OVERFLOW_HINTS)
    ):
        return error("context_overflow")
    missing_key = "api_key" in lowered and "missing" in lowered
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


def _public_message(exc: BaseException, message: str, kind: ErrorKind, status: int | None) -> str:
    """What users may read of a failure whose detail is `message`."""
    if kind in ("bad_request", "unknown") and _UNKNOWN_MODEL.search(_full_message(exc)):
        return UNKNOWN_MODEL
    if isinstance(exc, TimeoutError):
        return TIMED_OUT
    # A broken stream is described in our own words; a failed connection in the client's.
    if isinstance(exc, ConnectionError) and not isinstance(exc, MalformedStream):
        return CONNECTION_FAILED
    if len(message) > _SHOWN_CHARS or _DUMP.search(message):
        answer = f"HTTP {status}" if status is not None else "an unexpected error"
        return f"{answer} (the details are in the server's log)"
    return message


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
