"""WebSocket handshake guards: origin check and `?token=` authentication."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlparse

from channels.db import database_sync_to_async
from channels.middleware import BaseMiddleware
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.http.request import validate_host


class SameSiteOriginValidator:
    """Refuse handshakes whose Origin is not one of ALLOWED_HOSTS.

    Browsers always send Origin on a WebSocket handshake, so this stops cross-site
    pages from using a visitor's cookie. Clients without an Origin (scripts using
    `?token=`) are not browsers and pass.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        origin = dict(scope.get("headers", [])).get(b"origin")
        if origin is not None and not self._allowed(origin.decode("latin-1")):
            # Refusing before accept makes the server answer the handshake with 403.
            await send({"type": "websocket.close", "code": 4403})
            return None
        return await self.app(scope, receive, send)

    @staticmethod
    def _allowed(origin: str) -> bool:
        host = urlparse(origin).hostname
        if not host:
            return False
        allowed = list(settings.ALLOWED_HOSTS)
        if settings.DEBUG and not allowed:
            allowed = ["localhost", "127.0.0.1", "[::1]"]
        return validate_host(host if ":" not in host else f"[{host}]", allowed)


class TokenAuthMiddleware(BaseMiddleware):
    """`?token=<key>` with a DRF token authenticates the socket like a logged-in cookie."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        tokens = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token")
        if tokens:
            scope = dict(scope, user=await _user_for_token(tokens[0]))
        return await super().__call__(scope, receive, send)


@database_sync_to_async
def _user_for_token(key: str) -> Any:
    from rest_framework.authtoken.models import Token

    token = Token.objects.select_related("user").filter(key=key).first()
    if token is None or not token.user.is_active:
        return AnonymousUser()
    return token.user
