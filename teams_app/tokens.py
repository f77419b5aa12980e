"""API tokens as every door sees them: whose a secret is, whether secrets still hold, and a
person's named tokens made, listed and revoked.

Two kinds of token let a program in: Django REST framework's (`manage.py drf_create_token`,
one per person, kept as it is) and named tokens (`ApiToken`: many per person, each with a
name and an expiry, kept as a digest). A secret that starts with `services.TOKEN_PREFIX` is a
named token's; any other is looked up as a DRF key.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from teams_app.models import ApiToken, token_digest
from teams_app.services import TOKEN_PREFIX, create_token

logger = logging.getLogger(__name__)

# The most named tokens one person may hold: enough for every program they use, few enough
# that a list of them stays readable.
MAX_TOKENS = 50
# How stale `last_used` may get: a busy client writes it once a minute, not per request.
LAST_USED_EVERY = timedelta(seconds=60)


class TokenExpired(Exception):
    """A named token that is past its expiry: refused, with a reason its owner can act on."""

    def __init__(self, token: ApiToken) -> None:
        when = token.expires.isoformat() if token.expires else "?"
        super().__init__(f"This API token expired at {when}: make a new one.")
        self.token = token


class TooManyTokens(Exception):
    def __init__(self) -> None:
        super().__init__(
            f"You have {MAX_TOKENS} API tokens, the most a person may have: revoke one first."
        )


def is_named(secret: str) -> bool:
    return secret.startswith(TOKEN_PREFIX)


def user_for_secret(secret: str) -> tuple[Any, ApiToken | None] | None:
    """The active user whose token `secret` is, with the named token (None for a DRF key);
    None for no token of an active user. Raises `TokenExpired` for a named token past its
    expiry. Sync: the database."""
    if not secret:
        return None
    if not is_named(secret):
        from rest_framework.authtoken.models import Token

        drf = Token.objects.select_related("user").filter(key=secret).first()
        if drf is None or not drf.user.is_active:
            return None
        return drf.user, None
    token = ApiToken.objects.select_related("user").filter(digest=token_digest(secret)).first()
    if token is None or not token.user.is_active:
        return None
    now = timezone.now()
    if token.expired(now):
        raise TokenExpired(token)
    _note_use(token, now)
    return token.user, token


def _note_use(token: ApiToken, now: datetime) -> None:
    if token.last_used is not None and now - token.last_used < LAST_USED_EVERY:
        return
    # An update, not a save: no signal, no audit entry, and of two requests at once only one
    # writes.
    stale = Q(last_used__isnull=True) | Q(last_used__lt=now - LAST_USED_EVERY)
    ApiToken.objects.filter(stale, pk=token.pk).update(last_used=now)
    token.last_used = now


@dataclass(frozen=True, slots=True)
class Holder:
    """Whose a token still on record is, and whether it expired."""

    user_id: int
    expired: bool = False


def token_holders(secrets: Collection[str]) -> dict[str, Holder]:
    """Each of `secrets` that is still a token, with its user; a secret that is none (its
    token deleted) is left out. One query for the DRF keys and one for the named tokens."""
    named = {token_digest(secret): secret for secret in secrets if is_named(secret)}
    keys = [secret for secret in secrets if not is_named(secret)]
    found: dict[str, Holder] = {}
    if keys:
        from rest_framework.authtoken.models import Token

        for key, user_id in Token.objects.filter(key__in=keys).values_list("key", "user_id"):
            found[key] = Holder(user_id)
    if named:
        now = timezone.now()
        rows = ApiToken.objects.filter(digest__in=named).values_list("digest", "user_id", "expires")
        for digest, user_id, expires in rows:
            found[named[digest]] = Holder(user_id, expired=expires is not None and expires <= now)
    return found


def list_tokens(*, user: Any) -> QuerySet[ApiToken]:
    """`user`'s named tokens, newest first."""
    return ApiToken.objects.filter(user=user).order_by("-created", "-pk")


def find_token(*, user: Any, token_id: int) -> ApiToken | None:
    """`user`'s named token `token_id`; None for none of theirs."""
    return ApiToken.objects.filter(user=user, pk=token_id).first()


@transaction.atomic
def issue_token(*, user: Any, name: str, expires: datetime | None = None) -> tuple[ApiToken, str]:
    """A new named token of `user` and its secret, shown this once. Raises `TooManyTokens`
    past `MAX_TOKENS`."""
    # The person's row locked: two requests at once cannot both take the last place.
    get_user_model()._default_manager.select_for_update().filter(pk=user.pk).first()
    if ApiToken.objects.filter(user=user).count() >= MAX_TOKENS:
        raise TooManyTokens
    token, secret = create_token(user=user, name=name, expires=expires)
    logger.info("%s made the API token %r (%s…)", user, name, token.prefix)
    return token, secret


@transaction.atomic
def revoke_token(*, token: ApiToken) -> None:
    """The token deleted: every door refuses it from now on, and the sockets it opened
    close (`agent.accounts.end_token`)."""
    logger.info("%s revoked the API token %r (%s…)", token.user, token.name, token.prefix)
    token.delete()
