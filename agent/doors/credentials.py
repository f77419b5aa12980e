"""What a chat socket was let in with, and whether it still holds.

A socket is opened with an API token (`?token=`: a named token or a DRF token's key) or a
login session (the cookie), for one user. Access can end while it is open: the user
deactivated or deleted, the token deleted or expired, the login signed out, or ended by a
password change (Django keeps the password's hash in each login session, and a login whose
hash is not the user's current one no longer counts: `django.contrib.auth.get_user`).
`revoked` looks at many sockets' credentials at once, in a few queries, for the process's
poll (`revocation`) as well as for one socket before it acts.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import Enum
from importlib import import_module
from typing import Any

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.core.exceptions import ValidationError
from django.utils import timezone
from django.utils.crypto import constant_time_compare

from agent.turn import credential_digest
from teams_app.tokens import Holder, token_holders

# Where `ws_auth.TokenAuthMiddleware` leaves the secret of the token that let a socket in.
TOKEN_SCOPE_KEY = "agent_token"
# The session engine whose logins are rows, which one query reads together.
_DB_ENGINE = "django.contrib.sessions.backends.db"


class Revoked(Enum):
    """Why a credential no longer lets its socket in."""

    DELETED = "deleted"  # the user is gone, and their chats with them
    INACTIVE = "inactive"
    TOKEN = "token"  # the token was deleted
    EXPIRED = "expired"  # the named token is past its expiry
    LOGIN = "login"  # signed out, expired, or ended by a password change


@dataclass(frozen=True, slots=True)
class Credential:
    """A socket's user and what let it in: a token's key or a login session's key (neither
    for a user given to the socket some other way, which only the user's state decides)."""

    user_id: int
    token: str | None = None
    login: str | None = None

    @property
    def digest(self) -> str:
        """How a channel message names this credential (`agent.turn.credential_digest`)."""
        secret = self.token or self.login
        return credential_digest(secret) if secret else ""


def credential_of(scope: Mapping[str, Any]) -> Credential:
    """The credential of an authenticated socket's handshake."""
    user_id = scope["user"].pk
    token = scope.get(TOKEN_SCOPE_KEY)
    if token:
        return Credential(user_id, token=token)
    session = scope.get("session")
    return Credential(user_id, login=session.session_key if session is not None else None)


def revoked(credentials: Collection[Credential]) -> dict[Credential, Revoked]:
    """The credentials among `credentials` that no longer hold, each with why (sync: the
    database). One query for the users, one for each kind of token and one for the logins,
    however many credentials there are (logins of a session engine other than the
    database's: one look each)."""
    if not credentials:
        return {}
    user_model = get_user_model()
    ids = {credential.user_id for credential in credentials}
    users = {user.pk: user for user in user_model._default_manager.filter(pk__in=ids)}
    secrets = {credential.token for credential in credentials if credential.token}
    holders = token_holders(secrets) if secrets else {}
    logins = {credential.login for credential in credentials if credential.login}
    sessions = _login_data(logins) if logins else {}
    found = {}
    for credential in credentials:
        user = users.get(credential.user_id)
        why: Revoked | None = None
        if user is None:
            why = Revoked.DELETED
        elif not getattr(user, "is_active", True):
            why = Revoked.INACTIVE
        elif credential.token:
            why = _token_revoked(holders.get(credential.token), user.pk)
        elif credential.login and not _login_holds(sessions.get(credential.login, {}), user):
            why = Revoked.LOGIN
        if why is not None:
            found[credential] = why
    return found


def _token_revoked(holder: Holder | None, user_id: int) -> Revoked | None:
    if holder is None or holder.user_id != user_id:
        return Revoked.TOKEN
    return Revoked.EXPIRED if holder.expired else None


def _login_data(keys: Collection[str]) -> dict[str, dict[str, Any]]:
    """What each login session holds; a session that is gone or expired holds nothing.
    Read without a write: a login is looked at, never touched (`get_user` would cycle or
    flush it, which only a request, with its cookie to send back, may do)."""
    store = import_module(settings.SESSION_ENGINE).SessionStore
    if settings.SESSION_ENGINE != _DB_ENGINE:
        return {key: store(key).load() for key in keys}
    rows = store.get_model_class().objects.filter(
        session_key__in=keys, expire_date__gt=timezone.now()
    )
    decoder = store()
    return {
        key: decoder.decode(data) for key, data in rows.values_list("session_key", "session_data")
    }


def _login_holds(data: Mapping[str, Any], user: Any) -> bool:
    """Whether a login session still signs `user` in, by the rules of
    `django.contrib.auth.get_user`: its user, a backend still configured, and the session
    hash of the user's password as it is now (or as a fallback secret key made it)."""
    try:
        user_id = type(user)._meta.pk.to_python(data[SESSION_KEY])
    except (KeyError, ValueError, ValidationError):
        return False
    if user_id != user.pk or data.get(BACKEND_SESSION_KEY) not in settings.AUTHENTICATION_BACKENDS:
        return False
    session_hash = data.get(HASH_SESSION_KEY)
    if not session_hash:
        return False
    if constant_time_compare(session_hash, user.get_session_auth_hash()):
        return True
    return any(
        constant_time_compare(session_hash, fallback)
        for fallback in user.get_session_auth_fallback_hash()
    )
