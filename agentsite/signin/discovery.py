"""The identity provider's endpoints, from its discovery document.

Only the issuer is configured (`AGENT_OIDC_ISSUER`); the rest is read from
`<issuer>/.well-known/openid-configuration` at first use and kept in the process for a few
minutes, per issuer: a change of issuer (the admin's, a test's) is followed at once, a change
at the provider within minutes. `provider_setting` is mozilla-django-oidc's `get_settings`
for the backend and the views (`agentsite.signin.oidc`).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
from mozilla_django_oidc.utils import import_from_settings

from agent.conf import agent_settings

# How long a discovery document is kept: a provider's endpoints and keys' address change
# seldom, and a few minutes is as long as a change at the provider waits to be seen here.
DISCOVERY_SECONDS = 300

_ENDPOINTS = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
}


class ProviderUnavailable(Exception):
    """No provider is configured, or its discovery document could not be read."""


_documents: dict[str, tuple[float, dict[str, Any]]] = {}
_documents_lock = threading.Lock()


def configured_issuer() -> str:
    return agent_settings().oidc_issuer.strip()


def discovery(issuer: str | None = None) -> dict[str, Any]:
    """The provider's discovery document, from the process's cache while it is fresh."""
    issuer = configured_issuer() if issuer is None else issuer
    if not issuer:
        raise ProviderUnavailable("no identity provider is configured (AGENT_OIDC_ISSUER)")
    now = time.monotonic()
    with _documents_lock:
        cached = _documents.get(issuer)
    if cached is not None and cached[0] > now:
        return cached[1]
    url = issuer.rstrip("/") + "/.well-known/openid-configuration"
    try:
        response = httpx.get(
            url,
            timeout=import_from_settings("OIDC_TIMEOUT", 10),
            verify=import_from_settings("OIDC_VERIFY_SSL", True),
        )
        response.raise_for_status()
        document = response.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise ProviderUnavailable(f"could not read {url}: {exc}") from exc
    if not isinstance(document, dict):
        raise ProviderUnavailable(f"{url} is not a discovery document")
    # The document must be the issuer's own (OpenID Connect Discovery, section 4.3): its
    # `issuer` is what every id token's `iss` is held to.
    if str(document.get("issuer", "")).rstrip("/") != issuer.rstrip("/"):
        raise ProviderUnavailable(
            f"{url} names the issuer {document.get('issuer')!r}, not {issuer!r}"
        )
    missing = [
        key
        for key in ("authorization_endpoint", "token_endpoint", "jwks_uri")
        if not document.get(key)
    ]
    if missing:
        raise ProviderUnavailable(f"{url} lacks {', '.join(missing)}")
    with _documents_lock:
        _documents[issuer] = (now + DISCOVERY_SECONDS, document)
    return document


def forget_discovery() -> None:
    """Read the discovery documents afresh at their next use."""
    with _documents_lock:
        _documents.clear()


def provider_setting(attr: str, *default: Any) -> Any:
    """mozilla-django-oidc's settings: the endpoints from discovery, the client's from the
    agent's settings at call time, the rest from Django's."""
    if attr in _ENDPOINTS:
        return discovery().get(_ENDPOINTS[attr])
    conf = agent_settings()
    if attr == "OIDC_RP_CLIENT_ID":
        return conf.oidc_client_id
    if attr == "OIDC_RP_CLIENT_SECRET":
        return conf.oidc_client_secret
    if attr == "OIDC_RP_SCOPES":
        return conf.oidc_scopes
    if attr == "OIDC_TOKEN_USE_BASIC_AUTH":
        return bool(conf.oidc_client_secret) and secret_in_header(discovery())
    return import_from_settings(attr, *default)


def secret_in_header(document: dict[str, Any]) -> bool:
    """Whether the client's secret goes to the token endpoint in the Authorization header
    (client_secret_basic) rather than the form (client_secret_post, the library's way): only
    when the provider says it takes the header and not the form. The two must not be sent
    together (RFC 6749, 2.3)."""
    methods = document.get("token_endpoint_auth_methods_supported")
    if not isinstance(methods, list):
        return False  # said nowhere: the form, which nearly every provider takes
    return "client_secret_basic" in methods and "client_secret_post" not in methods
