"""Who made each change the audit log records, for every door that takes a request.

django-auditlog's middleware reads `request.user` as the request comes in, before Django
REST Framework has looked at an `Authorization: Token …` (or `Bearer …`) header: every
change made through the API with a token would be logged with no actor. A mixin on each
view would have to be remembered by every view to come; here the actor is worked out only
when a log entry is saved, by then from the user DRF authenticated (it writes them to the
underlying request too), or else from the header through the same authentication classes
DRF is configured with. A request that changes nothing costs no token lookup.

The address is the one the sign-in throttle counts (`client_address`): X-Forwarded-For is
believed only as far as AGENT_PROXY_COUNT says there are proxies, where django-auditlog's
own would take its first entry, which the client writes.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models.signals import pre_save
from django.http import HttpRequest
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


# The request being answered, for the receiver below; None outside a request.
_request: ContextVar[HttpRequest | None] = ContextVar("audit_request", default=None)


class AuditActorMiddleware:
    """Names the request each change logged while it is answered was made in.

    Sync and async alike: django-auditlog's own middleware is sync only, and one sync
    middleware makes Django run every async view (the chat's API, the OpenAI door's streams)
    in a thread of its own. It also connects a signal receiver per request, where one
    receiver for the whole process (`fill_in`) reads the request from a context variable."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Any) -> None:
        # Where requests are answered, and only there, log entries look for theirs.
        connect()
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self._answer(request)
        token = _request.set(request)
        try:
            return self.get_response(request)
        finally:
            _request.reset(token)

    async def _answer(self, request: HttpRequest) -> Any:
        token = _request.set(request)
        try:
            return await self.get_response(request)
        finally:
            _request.reset(token)


def fill_in(sender: Any, instance: Any, **kwargs: Any) -> None:
    """Before a log entry is saved: who made the change and from where, when a request is
    being answered and nothing else (`auditlog.context.set_actor`) said so already."""
    request = _request.get()
    if request is None:
        return
    if instance.actor_id is None and not instance.actor_email:
        actor = request_actor(request)
        if actor is not None:
            instance.actor = actor
            instance.actor_email = getattr(actor, "email", None)
    if instance.remote_addr is None and not getattr(
        settings, "AUDITLOG_DISABLE_REMOTE_ADDR", False
    ):
        instance.remote_addr = client_address(request)


def connect() -> None:
    from auditlog.models import LogEntry

    pre_save.connect(fill_in, sender=LogEntry, dispatch_uid="agentsite.audit_actor")
