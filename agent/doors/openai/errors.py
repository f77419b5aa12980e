"""Errors in OpenAI's shape: `{"error": {"message", "type", "code", "param"}}` with the
status OpenAI's API gives the same mistake, so that a client's own error handling (the
`openai` SDK's `AuthenticationError`, `NotFoundError`, `BadRequestError`, ...) applies."""

from __future__ import annotations

import json
from typing import Any

from django.http import JsonResponse

INVALID_REQUEST = "invalid_request_error"
SERVER_ERROR = "server_error"


class OpenAIError(Exception):
    """A request answered with an error. `retry`: whether a client may send the same
    request again (the SDK retries 5xx and 429 unless told not to: a turn that ran its tools
    and then failed would run them twice)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = INVALID_REQUEST,
        code: str | None = None,
        param: str | None = None,
        retry: bool = True,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.param = param
        self.retry = retry
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }

    def response(self) -> JsonResponse:
        response = JsonResponse(self.body(), status=self.status)
        for name, value in self.headers.items():
            response[name] = value
        if not self.retry:
            response["x-should-retry"] = "false"
        return response

    def event(self) -> bytes:
        """The error as a server-sent event, for a stream already under way."""
        return f"data: {json.dumps(self.body())}\n\n".encode()


def invalid(param: str | None, message: str, code: str | None = "invalid_value") -> OpenAIError:
    return OpenAIError(400, message, code=code, param=param)


def unsupported(param: str, message: str, *, value: bool = True) -> OpenAIError:
    """A parameter OpenAI knows and this door cannot honour (or, `value`, one of its
    values): refused rather than quietly ignored."""
    code = "unsupported_value" if value else "unsupported_parameter"
    return OpenAIError(400, message, code=code, param=param)


def invalid_type(param: str, expected: str, value: object) -> OpenAIError:
    return invalid(
        param,
        f"Invalid type for '{param}': expected {expected}, but got {type_name(value)} instead.",
        code="invalid_type",
    )


def missing(param: str) -> OpenAIError:
    return invalid(param, f"Missing required parameter: '{param}'.", "missing_required_parameter")


def model_not_found(model: object) -> OpenAIError:
    return OpenAIError(
        404,
        f"The model `{model}` does not exist or you do not have access to it.",
        code="model_not_found",
    )


def type_name(value: object) -> str:
    """A JSON value's type as OpenAI's messages name it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a decimal"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"
