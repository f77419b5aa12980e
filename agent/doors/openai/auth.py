"""Who is asking: `Authorization: Bearer <key>`, the key being one of the API's DRF tokens
(`manage.py drf_create_token <user>`, or the admin's tokens page)."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.http import HttpRequest
from rest_framework.authtoken.models import Token

from agent.doors.openai.errors import OpenAIError

NO_KEY = (
    "You didn't provide an API key. You need to provide your API key in an Authorization "
    "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY): one of this site's API "
    "tokens."
)
WRONG_KEY = "Incorrect API key provided. Use one of this site's API tokens."


async def authenticate(request: HttpRequest) -> User:
    scheme, _, key = request.headers.get("Authorization", "").strip().partition(" ")
    key = key.strip()
    if scheme.lower() not in ("bearer", "token") or not key:
        raise _unauthorized(NO_KEY)
    token = await Token.objects.select_related("user").filter(key=key).afirst()
    if token is None or not token.user.is_active:
        raise _unauthorized(WRONG_KEY)
    return token.user


def _unauthorized(message: str) -> OpenAIError:
    return OpenAIError(401, message, code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"})
