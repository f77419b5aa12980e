"""Signing in through the organisation's OpenID Connect provider (mozilla-django-oidc).

Only the issuer is configured (`AGENT_OIDC_ISSUER`): the provider's endpoints come from its
discovery document (`agentsite.signin.discovery`), the client's id, secret and scopes from
the agent's settings, each read at its use (`get_settings` of the backend and both views).

What this adds to mozilla-django-oidc:

- the id token's issuer, audience and expiry are checked (the library checks its signature
  and nonce alone);
- a person is found by the provider's (issuer, subject), never by e-mail: an address at the
  provider can change hands, and a local account with the same address or name is never
  taken over; a new person gets a username of their own, made unique;
- at each sign-in their name and address follow the provider's, and the groups claim
  decides their synced teams (`teams_app.services.sync_memberships`);
- an account deactivated here is refused, and a login of one ends (`get_user`);
- a provider that is not configured, not reachable or that says no leads to the sign-in
  page with a plain message, never to an error page.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

import jwt
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import SuspiciousOperation
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.views.generic import View
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from agent.conf import agent_settings
from agentsite.signin.discovery import (
    ProviderUnavailable,
    configured_issuer,
    discovery,
    provider_setting,
)
from teams_app.models import SignInIdentity, Team
from teams_app.selectors import provisioned_user
from teams_app.services import sync_memberships

logger = logging.getLogger(__name__)

# Clocks differ a little between the provider and this site.
LEEWAY_SECONDS = 60

# What the sign-in page says when the provider did not sign somebody in.
UNREACHABLE = "The identity provider could not be reached. Please try again in a moment."
DECLINED = "Sign-in was cancelled or refused at the identity provider."
PROVIDER_ERROR = "The identity provider could not sign you in. Please try again."
REFUSED = "Your sign-in through the identity provider was refused."
DEACTIVATED = "Your account here is deactivated. Ask an administrator to enable it."
EXPIRED = "That sign-in had expired or was already used. Please try again."


# ---- the backend ----------------------------------------------------------------------------


def _refuse(request: HttpRequest | None, text: str) -> None:
    """What the sign-in page will say of this refusal (see `ProviderCallback`)."""
    if request is not None:
        request.oidc_refusal = text  # type: ignore[attr-defined]


class ProviderBackend(OIDCAuthenticationBackend):
    """Signs in the person the provider's callback names, by their (issuer, subject)."""

    get_settings = staticmethod(provider_setting)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # No network here, unlike the library's: Django makes a backend for each sign-in
        # of any kind and each request of a login of this one. The settings are read at
        # their use, by the properties below.
        self.UserModel = get_user_model()

    # The library's attribute names, each read at its use.
    OIDC_RP_IDP_SIGN_KEY = None

    @property
    def OIDC_OP_TOKEN_ENDPOINT(self) -> str:
        return str(self.get_settings("OIDC_OP_TOKEN_ENDPOINT"))

    @property
    def OIDC_OP_USER_ENDPOINT(self) -> str | None:
        return self.get_settings("OIDC_OP_USER_ENDPOINT")  # type: ignore[no-any-return]

    @property
    def OIDC_OP_JWKS_ENDPOINT(self) -> str:
        return str(self.get_settings("OIDC_OP_JWKS_ENDPOINT"))

    @property
    def OIDC_RP_CLIENT_ID(self) -> str:
        return str(self.get_settings("OIDC_RP_CLIENT_ID"))

    @property
    def OIDC_RP_CLIENT_SECRET(self) -> str:
        return str(self.get_settings("OIDC_RP_CLIENT_SECRET"))

    @property
    def OIDC_RP_SIGN_ALGO(self) -> str:
        return str(self.get_settings("OIDC_RP_SIGN_ALGO", "RS256"))

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> Any:
        # Only the provider's callback passes a nonce: a password sign-in, or a login page
        # opened with `?code=&state=` in its address, is none of this backend's business.
        if request is None or "nonce" not in kwargs or not configured_issuer():
            return None
        return super().authenticate(request, **kwargs)

    def get_token(self, payload: dict[str, Any]) -> Any:
        # The same address the authorization request named (`callback_url`), as the
        # provider requires.
        payload = {**payload, "redirect_uri": callback_url(self.request)}
        if not payload.get("client_secret"):
            # A public client, PKCE alone: it names itself and sends no secret (RFC 6749, 2.3).
            payload.pop("client_secret", None)
        return super().get_token(payload)

    def get_payload_data(self, token: bytes | str, key: Any) -> dict[str, Any]:
        """The id token's claims, once its signature, issuer, audience and expiry hold."""
        issuer = str(discovery()["issuer"])
        client_id = self.OIDC_RP_CLIENT_ID
        try:
            payload: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[self.OIDC_RP_SIGN_ALGO],
                audience=client_id,
                issuer=issuer,
                leeway=LEEWAY_SECONDS,
                options={"require": ["iss", "aud", "exp", "sub"]},
            )
        except jwt.PyJWTError as exc:
            raise SuspiciousOperation(f"the id token was refused: {exc}") from exc
        # Issued to several clients: it must have been issued for this one (Core, 3.1.3.7).
        audience = payload["aud"]
        if isinstance(audience, list) and len(audience) > 1 and payload.get("azp") != client_id:
            raise SuspiciousOperation("the id token was issued for another client (azp)")
        return payload

    def get_userinfo(self, access_token: str, id_token: str, payload: dict[str, Any]) -> Any:
        if not self.OIDC_OP_USER_ENDPOINT:  # optional for a provider: the id token says it all
            return {}
        return super().get_userinfo(access_token, id_token, payload)

    def get_or_create_user(
        self, access_token: str, id_token: str, payload: dict[str, Any]
    ) -> AbstractBaseUser | None:
        info = self.get_userinfo(access_token, id_token, payload)
        if not isinstance(info, dict):
            raise SuspiciousOperation("the provider's userinfo is not an object")
        if info.get("sub", payload["sub"]) != payload["sub"]:
            raise SuspiciousOperation("the provider's userinfo is about someone else")
        claims = {**payload, **info}
        issuer, subject = str(payload["iss"]), str(payload["sub"])
        with transaction.atomic():
            identity = (
                SignInIdentity.objects.select_related("user")
                .filter(issuer=issuer, subject=subject)
                .first()
            )
            user: Any
            if identity is not None:
                user = identity.user
                if not user.is_active:
                    logger.warning("refused %s at sign-in: the account is deactivated", user)
                    _refuse(self.request, DEACTIVATED)
                    return None
                self.update_user(user, claims)
            elif (provisioned := self.provisioned(claims)) is not None:
                # Made by the provider's provisioning (SCIM) before its first sign-in.
                user = provisioned
                if not user.is_active:
                    logger.warning("refused %s at sign-in: the account is deactivated", user)
                    _refuse(self.request, DEACTIVATED)
                    return None
                self.update_user(user, claims)
            elif self.get_settings("OIDC_CREATE_USER", True):
                user = self.create_user(claims)
            else:
                logger.info("refused %s of %s: no account here", subject, issuer)
                _refuse(self.request, REFUSED)
                return None
            sync_memberships(
                user=user,
                groups=self.groups_of(user, payload, info),
                provider="oidc",
                issuer=issuer,
                subject=subject,
                patterns=agent_settings().oidc_team_groups,
            )
        return user

    @staticmethod
    def provisioned(claims: Mapping[str, Any]) -> Any:
        """The account provisioning made for this person, found by their name there, or by
        their address when the provider vouches for it."""
        email = str(claims.get("email") or "") if claims.get("email_verified", True) else ""
        return provisioned_user(username=str(claims.get("preferred_username") or ""), email=email)

    def groups_of(
        self, user: Any, payload: Mapping[str, Any], info: Mapping[str, Any]
    ) -> list[str]:
        """The person's groups at the provider, from the id token or the userinfo."""
        claim = agent_settings().oidc_groups_claim
        source = payload if claim in payload else info
        if claim not in source:
            referenced = {**info.get("_claim_names", {}), **payload.get("_claim_names", {})}
            if claim in referenced:
                # Microsoft Entra's "overage": too many groups to list, only a link to them.
                # The person's synced teams stay as they are rather than all being lost.
                logger.warning(
                    "the provider sent no %r for %s, only a reference to it: their teams are "
                    "left as they were (send fewer groups, e.g. those assigned to the app)",
                    claim,
                    user,
                )
                return list(Team.objects.filter(group__user=user).values_list("slug", flat=True))
            return []
        groups = source[claim]
        if isinstance(groups, str):
            return [groups]
        if isinstance(groups, list):
            return [str(group) for group in groups]
        logger.warning("the provider's %r claim is neither a list nor a string", claim)
        return []

    def create_user(self, claims: Mapping[str, Any]) -> AbstractBaseUser:
        username = unique_username(username_from(claims))
        user = self.UserModel.objects.create_user(username)  # no password: the provider's
        self.update_user(user, claims)
        logger.info("made the account %s for %s at %s", username, claims["sub"], claims["iss"])
        return user  # type: ignore[no-any-return]

    def update_user(self, user: Any, claims: Mapping[str, Any]) -> Any:
        """Their name and address as the provider has them now (the username stays: it
        names their folder)."""
        fields = {
            "email": str(claims.get("email") or "")[:254],
            "first_name": str(claims.get("given_name") or claims.get("name") or "")[:150],
            "last_name": str(claims.get("family_name") or "")[:150],
        }
        changed = [name for name, value in fields.items() if getattr(user, name) != value]
        for name in changed:
            setattr(user, name, fields[name])
        if changed:
            user.save(update_fields=changed)
        return user

    def get_user(self, user_id: Any) -> Any:
        # The library's would keep a deactivated person's login going.
        user = super().get_user(user_id)
        return user if user is not None and self.user_can_authenticate(user) else None


_NOT_IN_USERNAME = re.compile(r"[^\w.@+-]")


def username_from(claims: Mapping[str, Any]) -> str:
    """The name a new person is given: the provider's username, else their address's local
    part, else their subject; only the characters Django's usernames allow."""
    email = str(claims.get("email") or "")
    for candidate in (claims.get("preferred_username"), email.partition("@")[0], claims["sub"]):
        name = _NOT_IN_USERNAME.sub("", str(candidate or "")).strip(".")[:140]
        if name:
            return name
    return "user"


def unique_username(name: str) -> str:
    """`name`, or `name-2`, `name-3`...: never an existing account's, whatever its case."""
    taken = get_user_model()._default_manager.filter
    candidate, number = name, 1
    while taken(username__iexact=candidate).exists():
        number += 1
        candidate = f"{name}-{number}"
    return candidate


# ---- the views ------------------------------------------------------------------------------


def callback_url(request: HttpRequest) -> str:
    """This site's `/oidc/callback/` as the browser reaches it, the address to register at
    the provider. With secure cookies the browser reaches the site over HTTPS (its cookies
    would not travel otherwise), though TLS may end at a proxy that hands the request on in
    plain HTTP."""
    url = request.build_absolute_uri(reverse("oidc_authentication_callback"))
    if settings.SESSION_COOKIE_SECURE and url.startswith("http://"):
        url = "https://" + url.removeprefix("http://")
    return url


def back_to_sign_in(request: HttpRequest, text: str) -> HttpResponse:
    messages.error(request, text)
    return HttpResponseRedirect(import_from_settings("LOGIN_REDIRECT_URL_FAILURE"))


class ProviderRedirect(OIDCAuthenticationRequestView):
    """`/oidc/authenticate/`: off to the provider, with `next` kept for the way back."""

    get_settings = staticmethod(provider_setting)

    def __init__(self, **kwargs: Any) -> None:
        View.__init__(self, **kwargs)  # the endpoint is read per request (the properties)

    @property
    def OIDC_OP_AUTH_ENDPOINT(self) -> str:
        return str(self.get_settings("OIDC_OP_AUTHORIZATION_ENDPOINT"))

    @property
    def OIDC_RP_CLIENT_ID(self) -> str:
        return str(self.get_settings("OIDC_RP_CLIENT_ID"))

    def get(self, request: HttpRequest) -> HttpResponse:
        if not configured_issuer():
            raise Http404("no identity provider is configured here")
        try:
            discovery()
        except ProviderUnavailable as exc:
            logger.error("sign-in through the identity provider: %s", exc)
            return back_to_sign_in(request, UNREACHABLE)
        return super().get(request)  # type: ignore[no-any-return]

    def get_extra_params(self, request: HttpRequest) -> dict[str, Any]:
        return {**super().get_extra_params(request), "redirect_uri": callback_url(request)}


class ProviderCallback(OIDCAuthenticationCallbackView):
    """`/oidc/callback/`: the provider's answer; signed in, or back to the sign-in page
    with what went wrong."""

    get_settings = staticmethod(provider_setting)

    def get(self, request: HttpRequest) -> HttpResponse:
        if not configured_issuer():
            raise Http404("no identity provider is configured here")
        error = request.GET.get("error")
        if error:
            logger.info(
                "the identity provider answered %s: %s",
                error[:100],
                request.GET.get("error_description", "")[:300],
            )
            _refuse(request, DECLINED if error == "access_denied" else PROVIDER_ERROR)
        try:
            return super().get(request)  # type: ignore[no-any-return]
        except ProviderUnavailable as exc:
            logger.error("sign-in through the identity provider: %s", exc)
            _refuse(request, UNREACHABLE)
        except OSError as exc:
            # The token exchange or the userinfo (requests' errors are OSErrors): the
            # provider refused the code, or is away.
            logger.error("sign-in through the identity provider failed: %s", str(exc)[:500])
            _refuse(request, PROVIDER_ERROR)
        except SuspiciousOperation as exc:
            if "state not found" in str(exc):
                logger.info("a sign-in came back with an unknown state: %s", exc)
                _refuse(request, EXPIRED)
            else:
                logger.warning("refused a sign-in through the identity provider: %s", exc)
                _refuse(request, REFUSED)
        except (jwt.PyJWTError, KeyError, ValueError, TypeError) as exc:
            logger.warning("refused a sign-in through the identity provider: %r", exc)
            _refuse(request, REFUSED)
        return self.login_failure()

    def login_failure(self) -> HttpResponse:
        user = getattr(self, "user", None)
        if user is not None and not user.is_active:
            logger.warning("refused %s at sign-in: the account is deactivated", user)
            _refuse(self.request, DEACTIVATED)
        text = getattr(self.request, "oidc_refusal", None) or REFUSED
        return back_to_sign_in(self.request, text)


def provider_sign_in_url(next_url: str = "") -> str:
    """Where the sign-in page's button leads, `next` kept."""
    url = reverse("oidc_authentication_init")
    return f"{url}?{urlencode({'next': next_url})}" if next_url else url
