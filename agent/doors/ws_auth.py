"""WebSocket handshake guards: origin check and `?token=` authentication."""

from __future__ import annotations

from typing import Any
from urllib.parse import ParseResult, parse_qs, urlparse

from channels.db import database_sync_to_async
from channels.middleware import BaseMiddleware
from channels.security.websocket import OriginValidator, WebsocketDenier
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.http.request import split_domain_port, validate_host

from agent.doors.credentials import TOKEN_SCOPE_KEY
from teams_app.tokens import TokenExpired, user_for_secret

# Any other scheme ("null" from sandboxed frames and file:// pages, extensions) is no site.
_WEB_SCHEMES = {"http", "https"}


class SameSiteOriginValidator(OriginValidator):
    """Refuse handshakes whose Origin is not the site's own: same scheme, host and port as
    the handshake's Host (which must be one of ALLOWED_HOSTS), or one of
    CSRF_TRUSTED_ORIGINS.

    Browsers always send Origin on a WebSocket handshake, so this stops other sites' pages
    (another port of the same host included) from using a visitor's cookie. Clients without
    an Origin (scripts using `?token=`) pass, but their cookie counts for nothing (see
    `TokenAuthMiddleware`).
    """

    def __init__(self, application: Any) -> None:
        # No fixed list is handed to Channels: `allowed_origins` reads the settings on each
        # handshake, so the trusted origins are never a stale copy.
        self.application = application

    @property
    def allowed_origins(self) -> list[str]:
        # Django's check requires a scheme on each entry; Channels would read a bare "*"
        # or "example.com" as a wildcard or any scheme.
        return [origin for origin in settings.CSRF_TRUSTED_ORIGINS if "://" in origin]

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        origin = dict(scope.get("headers", [])).get(b"origin")
        if origin is None or self._allowed(urlparse(origin.decode("latin-1")), scope):
            return await self.application(scope, receive, send)
        # Closing before accept makes the server answer the handshake with 403.
        return await WebsocketDenier()(scope, receive, send)

    def _allowed(self, origin: ParseResult, scope: dict[str, Any]) -> bool:
        if origin.scheme not in _WEB_SCHEMES:
            return False
        own = _own_origin(scope)
        if own is not None and self.match_allowed_origin(origin, own):
            return True
        return bool(self.valid_origin(origin))

    def match_allowed_origin(self, parsed_origin: ParseResult | None, pattern: str) -> bool:
        # Django's "https://*.example.com" names the subdomains only; Channels spells that
        # ".example.com" but lets the bare domain in as well.
        wildcard = "://*." in pattern
        pattern = pattern.replace("://*.", "://.", 1)
        try:
            matched = bool(super().match_allowed_origin(parsed_origin, pattern))
        except ValueError:  # a port that is no number or out of range, on either side
            return False
        if not (matched and wildcard and parsed_origin is not None):
            return matched
        return parsed_origin.hostname != (urlparse(pattern).hostname or "")[1:]


def _own_origin(scope: dict[str, Any]) -> str | None:
    """The handshake's own origin, when its Host is one this site answers to."""
    host = dict(scope.get("headers", [])).get(b"host", b"").decode("latin-1")
    domain, _ = split_domain_port(host)
    allowed = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not allowed:
        allowed = ["localhost", "127.0.0.1", "[::1]"]
    # A leading dot would make the origin a Channels wildcard for every subdomain.
    if not domain or domain.startswith(".") or not validate_host(domain, allowed):
        return None
    # Behind a TLS proxy, daphne's --proxy-headers makes the scheme the browser's.
    scheme = "https" if scope.get("scheme") in {"wss", "https"} else "http"
    return f"{scheme}://{host}"


class TokenAuthMiddleware(BaseMiddleware):
    """`?token=<secret>` with an API token (a named token, unexpired, or a DRF token's key)
    authenticates the socket like a logged-in cookie.

    The login cookie authenticates only a handshake that carries an Origin (which
    `SameSiteOriginValidator` has found to be the site's own). Without one it comes from no
    page of this site: a script replaying a stolen cookie, or a browser context that hides
    where it runs. Such a socket is anonymous, and closed with 4401 like any other.

    The token's secret stays in the scope (`credentials.TOKEN_SCOPE_KEY`): the socket lasts
    only as long as its token does (deleted or expired, it closes).
    """

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        tokens = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token")
        if tokens:
            user = await _user_for_token(tokens[0])
            scope = dict(scope, user=user)
            if user.is_authenticated:
                scope[TOKEN_SCOPE_KEY] = tokens[0]
        elif b"origin" not in dict(scope.get("headers", [])):
            scope = dict(scope, user=AnonymousUser())
        return await super().__call__(scope, receive, send)


@database_sync_to_async
def _user_for_token(secret: str) -> Any:
    try:
        found = user_for_secret(secret)
    except TokenExpired:
        return AnonymousUser()
    return AnonymousUser() if found is None else found[0]
