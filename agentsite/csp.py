"""The Content-Security-Policy header: the policy of `CONTENT_SECURITY_POLICY` in the
settings, plus the chat's WebSocket origin in `connect-src`."""

from __future__ import annotations

from csp.middleware import CSPMiddleware, PolicyParts
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponseBase


class ContentSecurityPolicyMiddleware(CSPMiddleware):
    """django-csp's middleware, adding `ws://` and `wss://` at the page's own host to
    `connect-src`: CSP Level 3 lets `'self'` match them, but a browser that predates it would
    refuse the chat's socket with `'self'` alone. Both schemes, since behind a TLS proxy the
    site may not know which one the page used."""

    def get_policy_parts(
        self, request: HttpRequest, response: HttpResponseBase, report_only: bool = False
    ) -> PolicyParts:
        parts = super().get_policy_parts(request, response, report_only)
        try:
            # Validated against ALLOWED_HOSTS, so a forged Host header adds nothing.
            host = request.get_host()
        except DisallowedHost:
            return parts
        parts.update = {**(parts.update or {})}
        sockets = [f"ws://{host}", f"wss://{host}"]
        parts.update["connect-src"] = [*parts.update.get("connect-src", []), *sockets]
        return parts
