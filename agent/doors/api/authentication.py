"""Who a request of the API is, from its `Authorization` header: `Token <secret>` or
`Bearer <secret>`, the secret a named API token's (`/api/tokens`) or a DRF token's key."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication, get_authorization_header
from rest_framework.request import Request

from teams_app.tokens import TokenExpired, user_for_secret

KEYWORDS = (b"token", b"bearer")


class ApiTokenAuthentication(TokenAuthentication):
    """DRF's token authentication, which named tokens pass as well, and `Bearer` as well as
    `Token`: the header an OpenAI client sends works here too. `request.auth` is the named
    token, or None for a DRF key."""

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        words = get_authorization_header(request).split()
        if not words or words[0].lower() not in KEYWORDS:
            return None
        if len(words) == 1:
            raise exceptions.AuthenticationFailed(
                _("Invalid token header. No credentials provided.")
            )
        if len(words) > 2:
            raise exceptions.AuthenticationFailed(
                _("Invalid token header. Token string should not contain spaces.")
            )
        try:
            secret = words[1].decode()
        except UnicodeError:
            raise exceptions.AuthenticationFailed(
                _("Invalid token header. Token string should not contain invalid characters.")
            ) from None
        return self.authenticate_credentials(secret)

    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        try:
            found = user_for_secret(key)
        except TokenExpired as expired:
            raise exceptions.AuthenticationFailed(str(expired)) from None
        if found is None:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        return found


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = ApiTokenAuthentication
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Token <secret>` or `Bearer <secret>`: one of your API tokens "
            "(`POST /api/tokens`), or a token an admin made for you.",
        }
