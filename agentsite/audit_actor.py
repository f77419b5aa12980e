"""Who made each change the audit log records, for every door that takes a request.

django-auditlog's middleware reads `request.user` as the request comes in, before Django
REST Framework has looked at an `Authorization: Token …` (or `Bearer …`) header: every
change made through the API with a token would be logged with no actor. A mixin on each
view would have to be remembered by every view to come; here the actor is a lazy value,
worked out only when a log entry is saved, by then from the user DRF authenticated (it
writes them to the underlying request too), or else from the header through the same
authentication classes DRF is configured with. A request that changes nothing costs no
token lookup.

The address is the one the sign-in throttle counts (`client_address`): X-Forwarded-For is
believed only as far as AGENT_PROXY_COUNT says there are proxies, where django-auditlog's
own would take its first entry, which the client writes.
"""

from __future__ import annotations

from typing import Any

from auditlog.middleware import AuditlogMiddleware
from django.conf import settings
from django.contrib.auth import get_user_model
from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject
from rest_framework.authentication import SessionAuthentication
from rest_framework.exceptions import APIException
from rest_framework.request import Request
from rest_framework.settings import api_settings

from agentsite.login_throttle import client_address


def request_actor(request: HttpRequest) -> Any:
    """The account behind `request`: its session's, the one DRF authenticated, or the one
    its `Authorization` header names; None for nobody."""
    user = getattr(request, "user", None)
    if isinstance(user, get_user_model()) and user.is_authenticated:
        return user
    if not request.META.get("HTTP_AUTHORIZATION"):
        return None
    wrapped = Request(request)
    for authentication in api_settings.DEFAULT_AUTHENTICATION_CLASSES:
        # The session was read above, and DRF's session check would want a CSRF token.
        if issubclass(authentication, SessionAuthentication):
            continue
        try:
            found = authentication().authenticate(wrapped)
        except APIException:
            # A token that is wrong, expired or of an inactive account: nobody's change.
            return None
        if found is not None:
            return found[0]
    return None


class AuditActorMiddleware(AuditlogMiddleware):
    """django-auditlog's middleware with the actor looked up when a change is logged."""

    @staticmethod
    def _get_actor(request: HttpRequest) -> Any:
        return SimpleLazyObject(lambda: request_actor(request))

    @staticmethod
    def _get_remote_addr(request: HttpRequest) -> str | None:
        if getattr(settings, "AUDITLOG_DISABLE_REMOTE_ADDR", False):
            return None
        return client_address(request)
