"""How a model call failed: the kinds the loop acts on, read from whatever was raised.

The lean path raises errors with the server's status code and headers (`wire.ProviderError`)
and `ConnectionError`s for a broken stream or connection (`wire.MalformedStream`,
`wire.ConnectionFailed`); `classify` sorts those by status code, message and class. The
litellm path is sorted by `litellm_adapter.classify`, which reads litellm's exception
classes and hands what they say to `classify` here. Both adapters turn their HTTP client's
transport failures into `ConnectionError`.
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from typing import Literal

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


class LLMError(Exception):
    """A model call that failed for good. `kind` is what the caller can act on."""

    def __init__(
        self,
        message: str,
        *,
        kind: ErrorKind,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.status = status
        self.retry_after = retry_after

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
    exc: BaseException, *, known: ClassKind | None = None, default: ErrorKind = "unknown"
) -> LLMError:
    """Sort any failure of a model call into the kinds the loop knows how to handle.

    `known` is what the exception's class settles whatever its status; `default` is what
    its class says when neither the status code nor the message tells (a failure in
    mid-stream keeps the status of what broke, which says more than its class).
    """
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    message = _short_message(exc)
    lowered = message.lower()

    def error(kind: ErrorKind) -> LLMError:
        return LLMError(message, kind=kind, status=status, retry_after=_retry_after(exc))

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
