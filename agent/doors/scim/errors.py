"""SCIM's responses: `application/scim+json`, and errors as RFC 7644 §3.12 shapes them."""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpResponse

CONTENT_TYPE = "application/scim+json"
ERROR = "urn:ietf:params:scim:api:messages:2.0:Error"

# `scimType`s of RFC 7644 §3.12 that this door answers with.
INVALID_FILTER = "invalidFilter"
INVALID_SYNTAX = "invalidSyntax"
INVALID_PATH = "invalidPath"
INVALID_VALUE = "invalidValue"
NO_TARGET = "noTarget"
UNIQUENESS = "uniqueness"


def scim_response(
    body: Any = None, *, status: int = 200, headers: dict[str, str] | None = None
) -> HttpResponse:
    content = b"" if body is None else json.dumps(body).encode()
    return HttpResponse(content, status=status, content_type=CONTENT_TYPE, headers=headers)


class ScimError(Exception):
    """A request answered with a SCIM error: its HTTP status, what went wrong and, for a
    400 or 409, which of RFC 7644's kinds of mistake it was."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        scim_type: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.scim_type = scim_type
        self.headers = headers or {}

    def response(self) -> HttpResponse:
        body: dict[str, Any] = {"schemas": [ERROR], "status": str(self.status)}
        if self.scim_type:
            body["scimType"] = self.scim_type
        body["detail"] = self.detail
        return scim_response(body, status=self.status, headers=self.headers)


def not_found(kind: str, ident: str) -> ScimError:
    return ScimError(404, f"{kind} {ident} not found")


def invalid_value(detail: str) -> ScimError:
    return ScimError(400, detail, scim_type=INVALID_VALUE)


def invalid_syntax(detail: str) -> ScimError:
    return ScimError(400, detail, scim_type=INVALID_SYNTAX)


def taken(detail: str) -> ScimError:
    return ScimError(409, detail, scim_type=UNIQUENESS)
