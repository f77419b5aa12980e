"""Who is asking: `Authorization: Bearer <secret>`, the secret one of the person's API tokens
(a named token from `/api/tokens` or the chat's settings, or a DRF token from
`manage.py drf_create_token <user>` or the admin's tokens page)."""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.http import HttpRequest

from agent.doors.openai.errors import OpenAIError
from teams_app.tokens import TokenExpired, user_for_secret

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
    try:
        found = await sync_to_async(user_for_secret)(key)
    except TokenExpired as expired:
        raise _unauthorized(str(expired)) from None
    if found is None:
        raise _unauthorized(WRONG_KEY)
    user: User = found[0]
    return user


def _unauthorized(message: str) -> OpenAIError:
    return OpenAIError(401, message, code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"})
