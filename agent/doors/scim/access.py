"""Who may use the SCIM door, and how each of its requests is wrapped.

`AGENT_SCIM_TOKEN` unset: the door does not exist (404 at every URL, so that nothing tells
a scanner it is there). Set: a request carries `Authorization: Bearer <token>`, compared in
constant time; a login session counts for nothing here (no cookie, hence no CSRF check).

Every change a request makes is recorded in the audit log with no actor, the client's
address, "scim" as the actor's address and as the correlation id (the admin's log lists
and filters by it), and `{"via": "scim"}` as the entry's additional data.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import Any

from auditlog.context import auditlog_value, set_extra_data
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from agent import failures
from agent.conf import agent_settings
from agent.doors.scim.errors import ScimError, invalid_syntax
from agentsite.login_throttle import client_address

logger = logging.getLogger(__name__)

View = Callable[..., HttpResponse]
MARKER = "scim"
UNAUTHORIZED = "a bearer token is needed: the one AGENT_SCIM_TOKEN names"


def authorize(request: HttpRequest) -> None:
    expected = agent_settings().scim_token
    if not expected:
        raise ScimError(404, "not found")
    scheme, _, given = request.headers.get("Authorization", "").strip().partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        given.strip().encode(), expected.encode()
    ):
        raise ScimError(401, UNAUTHORIZED, headers={"WWW-Authenticate": 'Bearer realm="scim"'})


def scim_view(*methods: str) -> Callable[[View], View]:
    """An endpoint of the door: authorized, answering only `methods` (each request that
    changes something in one transaction, recorded as SCIM's in the audit log), and every
    failure as a SCIM error."""

    def wrap(view: View) -> View:
        @csrf_exempt  # a bearer token, never a cookie: nothing a forged page could use
        @wraps(view)
        def answer(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            try:
                authorize(request)
                if request.method not in methods:
                    allowed = ", ".join(methods)
                    raise ScimError(
                        405, f"{request.method} is not allowed here", headers={"Allow": allowed}
                    )
                if request.method == "GET":
                    return view(request, *args, **kwargs)
                with recorded_as_scim(request), transaction.atomic():
                    return view(request, *args, **kwargs)
            except ScimError as exc:
                return exc.response()
            except Exception:
                ref = failures.log_failure(
                    logger, "SCIM %s %s failed", request.method, request.path
                )
                return ScimError(500, failures.internal_error(ref)).response()

        return answer

    return wrap


@contextmanager
def recorded_as_scim(request: HttpRequest) -> Iterator[None]:
    """The audit log's entries made meanwhile are marked as SCIM's."""
    outer = auditlog_value.get(None)
    try:
        with set_extra_data(audit_marks(request)):
            yield
    finally:
        if outer is not None:
            # django-auditlog 3.4 does not restore the context it replaced: without this,
            # the audit middleware would leave its own signal receiver connected for good.
            auditlog_value.set(outer)


def audit_marks(request: HttpRequest) -> dict[str, Any]:
    return {
        "actor": None,
        "remote_addr": client_address(request),
        "actor_email": MARKER,
        "cid": MARKER,
        "additional_data": {"via": MARKER},
    }


def json_body(request: HttpRequest) -> dict[str, Any]:
    """The request's body, a JSON object (a SCIM client sends `application/scim+json` or
    `application/json`: either is read)."""
    try:
        body = json.loads(request.body or b"null")
    except (ValueError, UnicodeDecodeError) as exc:
        raise invalid_syntax(f"the body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise invalid_syntax("the body must be a JSON object")
    return body
