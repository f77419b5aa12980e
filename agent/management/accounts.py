"""Which account a command works as: `--user NAME`, else the first superuser."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

# CommandError's exit status for a user that does not exist: the caller asked for it.
BAD_USAGE = 2


def account(username: str | None) -> Any:
    """The active user `username`; with None the first superuser, or None when there is
    none yet (a fresh install: its turns then belong to no account). CommandError (exit
    status 2) for a name that is no active user's."""
    users = get_user_model().objects.filter(is_active=True)
    if username is None:
        return users.filter(is_superuser=True).order_by("pk").first()
    user = users.filter(**{get_user_model().USERNAME_FIELD: username}).first()
    if user is None:
        raise CommandError(
            f"no active user is called {username!r}: give the name of an account "
            "(the admin's Users page lists them)",
            returncode=BAD_USAGE,
        )
    return user
