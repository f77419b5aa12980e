"""Signing in with the organisation's LDAP directory or Active Directory (the `ldap` extra).

The settings module imports this module only when `AGENT_LDAP_SERVER_URI` is set, so a site
without the extra never imports `ldap`. A person signs in with their directory username and
password; the site finds them with the search account, checks the password by binding as
them, and keeps their name and email from the directory. The groups they are a member of,
by name (cn), are the teams they belong to, at each sign-in (`sync_memberships`).

With `AGENT_PASSWORD_LOGIN=false` the directory is the organisation's identity: its refusal
of anyone but a superuser is final, so a password set here long ago is never tried after it
(see agentsite/signin/passwords.py).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ImproperlyConfigured, PermissionDenied
from django.http import HttpRequest

MISSING_EXTRA = (
    "AGENT_LDAP_SERVER_URI is set, but the ldap extra is not installed. pip/uv: install the "
    "ldap extra (uv sync --extra ldap); it needs libldap2-dev and libsasl2-dev to build"
)

try:
    import ldap
    from django_auth_ldap.backend import LDAPBackend
    from django_auth_ldap.config import (
        ActiveDirectoryGroupType,
        GroupOfNamesType,
        LDAPGroupType,
        LDAPSearch,
        PosixGroupType,
    )
except ImportError as exc:  # pragma: no cover - the extra's absence is tested in a subprocess
    raise ImproperlyConfigured(MISSING_EXTRA) from exc

logger = logging.getLogger(__name__)

PROVIDER = "ldap"
# The directory's attributes that a person's name and email are kept from at each sign-in.
ATTRIBUTES = {"first_name": "givenName", "last_name": "sn", "email": "mail"}
# How long the site waits for an unreachable directory, in seconds: a sign-in should fail
# while the person is still looking at the page, not after the operating system gives up.
TIMEOUT = 10


def _group_kinds() -> dict[str, tuple[LDAPGroupType, str]]:
    """`AGENT_LDAP_GROUP_TYPE` → how such groups list their members, and what they are."""
    return {
        "groupofnames": (GroupOfNamesType(), "(objectClass=groupOfNames)"),
        "posixgroup": (PosixGroupType(), "(objectClass=posixGroup)"),
        "activedirectory": (ActiveDirectoryGroupType(), "(objectClass=group)"),
    }


def _user_search(value: str) -> LDAPSearch:
    base, _, pattern = value.partition("?")
    if not base.strip() or "%(user)s" not in pattern:
        raise ImproperlyConfigured(
            "AGENT_LDAP_USER_SEARCH must be a base DN and a filter with %(user)s, joined by "
            f"'?', as ou=people,dc=example,dc=com?(uid=%(user)s); it is {value!r}"
        )
    pattern = pattern.strip()
    if not pattern.startswith("("):
        pattern = f"({pattern})"
    return LDAPSearch(base.strip(), ldap.SCOPE_SUBTREE, pattern)


def ldap_settings(values: Mapping[str, Any]) -> dict[str, Any]:
    """django-auth-ldap's settings (`AUTH_LDAP_*`) from the site's `AGENT_LDAP_*` ones."""
    kind = values["AGENT_LDAP_GROUP_TYPE"]
    options: dict[int, Any] = {ldap.OPT_NETWORK_TIMEOUT: TIMEOUT, ldap.OPT_TIMEOUT: TIMEOUT}
    if kind == "activedirectory":
        # Active Directory answers a search of the domain's root with referrals to its other
        # partitions, which the library would follow with no credentials and fail on.
        options[ldap.OPT_REFERRALS] = 0
    result: dict[str, Any] = {
        "AUTH_LDAP_SERVER_URI": values["AGENT_LDAP_SERVER_URI"],
        "AUTH_LDAP_BIND_DN": values["AGENT_LDAP_BIND_DN"],
        "AUTH_LDAP_BIND_PASSWORD": values["AGENT_LDAP_BIND_PASSWORD"],
        "AUTH_LDAP_USER_SEARCH": _user_search(values["AGENT_LDAP_USER_SEARCH"]),
        "AUTH_LDAP_USER_ATTR_MAP": dict(ATTRIBUTES),
        "AUTH_LDAP_ALWAYS_UPDATE_USER": True,
        "AUTH_LDAP_CONNECTION_OPTIONS": options,
        # Teams come from the groups through sync_memberships, which leaves teams whose
        # members are set by hand alone; django-auth-ldap's own mirroring would not.
        "AUTH_LDAP_MIRROR_GROUPS": False,
        "AUTH_LDAP_FIND_GROUP_PERMS": False,
    }
    base = values["AGENT_LDAP_GROUP_SEARCH"].strip()
    if base:
        group_type, objects = _group_kinds()[kind]
        result["AUTH_LDAP_GROUP_SEARCH"] = LDAPSearch(base, ldap.SCOPE_SUBTREE, objects)
        result["AUTH_LDAP_GROUP_TYPE"] = group_type
    return result


class DirectoryBackend(LDAPBackend):  # type: ignore[misc]
    """django-auth-ldap's backend, with teams from the groups and the site's own refusals."""

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> Any:
        # Here, not at the top: the settings import this module before the models are ready.
        from agentsite.signin.passwords import passwords_allowed_for

        if password is None:
            return None  # not a password sign-in (the identity provider's)
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is None and not passwords_allowed_for(username):
            # The directory is the only judge of this person's password: stop here, before
            # the local password check that follows.
            raise PermissionDenied("the directory refused the sign-in")
        return user

    def get_or_build_user(self, username: str, ldap_user: Any) -> tuple[Any, bool]:
        user, built = super().get_or_build_user(username, ldap_user)
        if not built and not user.is_active:
            # Refused before anything of theirs is updated from the directory.
            logger.info("%s was deactivated here: the directory's sign-in is refused", user)
            raise ldap_user.AuthenticationFailed("deactivated here")
        return user, built

    def authenticate_ldap_user(self, ldap_user: Any, password: str) -> Any:
        # After the person is saved (django-auth-ldap's populate_user signal comes before
        # a new person has a primary key, which memberships need).
        from teams_app.services import sync_memberships

        user = super().authenticate_ldap_user(ldap_user, password)
        if user is None or self.settings.GROUP_SEARCH is None:
            return user
        try:
            groups = ldap_user.group_names
        except ldap.LDAPError as exc:
            # Without their groups their teams cannot be known, and a team they have left
            # must not stay open to them.
            logger.warning("%s's groups could not be read, sign-in refused: %s", user, exc)
            return None
        sync_memberships(
            user=user,
            groups=groups,
            provider=PROVIDER,
            issuer=str(self.settings.SERVER_URI),
            subject=ldap_user.dn,
            patterns=("*",),
        )
        return user

    def get_user(self, user_id: Any) -> Any:
        # A person deactivated here is signed out at their next request, as ModelBackend does.
        user = super().get_user(user_id)
        return user if user is not None and user.is_active else None
