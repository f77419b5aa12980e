"""Passwords switched off for everyone but the superusers (`AGENT_PASSWORD_LOGIN=false`).

A gate in front of the other backends: a password sign-in of anyone else is refused before
any password is checked (Django stops at a backend that raises `PermissionDenied`), so a
person who left the organisation cannot get in with a password they set here long ago. Sign-ins
without a password (the identity provider's) pass through untouched.

With an LDAP directory (`AGENT_LDAP_SERVER_URI`) people sign in with a username and password
too, the directory's: the gate lets those through to the directory's backend, which stands
before the local password check and whose refusal of anyone but a superuser is final (it
raises `PermissionDenied` itself), so that the local check sees superusers alone.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

from agent.conf import agent_settings

DIRECTORY_BACKEND = "agentsite.signin.directory.DirectoryBackend"


def passwords_allowed_for(username: str | None) -> bool:
    """Whether `username` may sign in with a password kept here (not the directory's)."""
    if agent_settings().password_login:
        return True
    if not username:
        return False
    model = get_user_model()
    return model._default_manager.filter(
        **{model.USERNAME_FIELD: username}, is_superuser=True, is_active=True
    ).exists()


class PasswordGate:
    """A backend that only ever refuses. It has no `get_user` on purpose: Django's test
    client signs people in with the first backend that has one, and a login session belongs
    to the backend that can find its user again."""

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> None:
        if password is None:
            return None  # not a password sign-in
        if passwords_allowed_for(username):
            return None
        if DIRECTORY_BACKEND in settings.AUTHENTICATION_BACKENDS:
            return None  # the directory's password, for the directory's backend to check
        raise PermissionDenied("passwords are for superusers alone here")
