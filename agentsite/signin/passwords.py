"""Passwords switched off for everyone but the superusers (`AGENT_PASSWORD_LOGIN=false`).

A gate in front of the other backends: a password sign-in of anyone else is refused before
any password is checked (Django stops at a backend that raises `PermissionDenied`), so a
person who left the organisation cannot get in with a password they set here long ago. Sign-ins
without a password (the identity provider's) pass through untouched.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import BaseBackend
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

from agent.conf import agent_settings


def passwords_allowed_for(username: str | None) -> bool:
    """Whether `username` may sign in with a password here."""
    if agent_settings().password_login:
        return True
    if not username:
        return False
    model = get_user_model()
    return model._default_manager.filter(
        **{model.USERNAME_FIELD: username}, is_superuser=True, is_active=True
    ).exists()


class PasswordGate(BaseBackend):
    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> None:
        if password is None:
            return None  # not a password sign-in
        if not passwords_allowed_for(username):
            raise PermissionDenied("passwords are for superusers alone here")
        return None
