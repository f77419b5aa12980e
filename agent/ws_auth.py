"""WebSocket handshake guards: origin check and `?token=` authentication."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlparse

from channels.db import database_sync_to_async
from channels.middleware import BaseMiddleware
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.http.request import validate_host

Origin = tuple[str, str, int]
_DEFAULT_PORTS = {"http": 80, "https": 443}


class SameSiteOriginValidator:
    """Refuse handshakes whose Origin is not the site's own: same scheme, host and port as
    the handshake's Host (which must be one of ALLOWED_HOSTS), or one of
    CSRF_TRUSTED_ORIGINS.

    Browsers always send Origin on a WebSocket handshake, so this stops other sites' pages
    (another port of the same host included) from using a visitor's cookie. Clients without
    an Origin (scripts using `?token=`) are not browsers and pass.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        headers = dict(scope.get("headers", []))
        origin = headers.get(b"origin")
        if origin is not None and not _allowed(origin.decode("latin-1"), scope, headers):
            # Refusing before accept makes the server answer the handshake with 403.
            await send({"type": "websocket.close", "code": 4403})
            return None
        return await self.app(scope, receive, send)


def _allowed(origin: str, scope: dict[str, Any], headers: dict[bytes, bytes]) -> bool:
    theirs = _parse(origin)
    if theirs is None:
        return False
    # Behind a TLS proxy, daphne's --proxy-headers makes the scheme the browser's.
    scheme = "https" if scope.get("scheme") in {"wss", "https"} else "http"
    host = headers.get(b"host", b"").decode("latin-1")
    ours = _parse(f"{scheme}://{host}") if host else None
    if ours is not None and theirs == ours and _host_allowed(ours[1]):
        return True
    return any(_trusted(theirs, trusted) for trusted in settings.CSRF_TRUSTED_ORIGINS)


def _parse(url: str) -> Origin | None:
    parsed = urlparse(url)
    if parsed.scheme not in _DEFAULT_PORTS or not parsed.hostname:
        return None
    try:
        port = parsed.port or _DEFAULT_PORTS[parsed.scheme]
    except ValueError:
        return None
    return parsed.scheme, parsed.hostname.lower(), port


def _host_allowed(host: str) -> bool:
    allowed = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not allowed:
        allowed = ["localhost", "127.0.0.1", "[::1]"]
    return validate_host(host if ":" not in host else f"[{host}]", allowed)


def _trusted(origin: Origin, trusted: str) -> bool:
    """`trusted` as Django reads CSRF_TRUSTED_ORIGINS: `https://example.com:8443`, or
    `https://*.example.com` for its subdomains."""
    wildcard = "://*." in trusted
    expected = _parse(trusted.replace("://*.", "://", 1))
    if expected is None or origin[0] != expected[0] or origin[2] != expected[2]:
        return False
    if wildcard:
        return origin[1].endswith("." + expected[1])
    return origin[1] == expected[1]


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
