"""What the site makes of the id token a provider sends: one for another client, from
another issuer or expired is refused; the groups come from the id token or the userinfo,
whichever has them. The provider here is `TokenDesk` (tests/oidc_provider), whose tokens the
test writes claim by claim, reached over HTTP; the site answers in this process. Also: the
discovery document's cache, and passwords left to superusers."""

from __future__ import annotations

import base64
import time
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from agentsite.signin import oidc
from agentsite.signin.discovery import forget_discovery
from teams_app.models import SignInIdentity
from teams_app.services import create_team
from tests.oidc_provider import (  # noqa: F401  (token_desk: the fixture)
    CLIENT_ID,
    TokenDesk,
    authorization_params,
    token_desk,
)

pytestmark = pytest.mark.django_db
FAILED = "/accounts/login/?provider_failed=1"


@pytest.fixture
def desk(token_desk: TokenDesk, settings: Any) -> TokenDesk:  # noqa: F811
    settings.AGENT_OIDC_ISSUER = token_desk.issuer
    settings.AGENT_OIDC_CLIENT_ID = CLIENT_ID
    settings.AGENT_OIDC_CLIENT_SECRET = "desk-secret"
    create_team(slug="support", name="Support")
    create_team(slug="billing", name="Billing")
    return token_desk


def callback(client: Client, desk: TokenDesk, **claims: Any) -> Any:
    """A sign-in whose provider answers with an id token of `claims` (None: left out)."""
    start = client.get("/oidc/authenticate/")
    assert start.status_code == 302, start.content[:300]
    params = authorization_params(start["Location"])
    desk.token(params["nonce"], **claims)
    return client.get("/oidc/callback/", {"code": "a-code", "state": params["state"]})


def refused(client: Client, answer: Any, text: str = oidc.REFUSED) -> bool:
    page = client.get(FAILED).content.decode()
    return (
        answer.status_code == 302
        and answer["Location"] == FAILED
        and text in page
        and client.get("/").status_code == 302
        and not User.objects.exists()
    )


def test_a_good_token_signs_in_with_the_groups_it_names(client: Client, desk: TokenDesk) -> None:
    answer = callback(client, desk, groups=["Support", "elsewhere"])

    assert answer["Location"] == "/"
    grace = User.objects.get(username="grace")
    assert list(grace.groups.values_list("name", flat=True)) == ["support"]
    assert SignInIdentity.objects.get(user=grace).issuer == desk.issuer
    # The token endpoint was asked with the code, the client's secret and PKCE's verifier.
    (asked,) = desk.token_requests
    assert asked["code"] == ["a-code"] and asked["client_secret"] == ["desk-secret"]
    assert asked["redirect_uri"] == ["http://testserver/oidc/callback/"]
    assert len(asked["code_verifier"][0]) >= 43


@pytest.mark.parametrize(
    "claims",
    [
        {"aud": "another-client"},
        {"aud": ["another-client", "a-third"]},
        {"aud": [CLIENT_ID, "another-client"], "azp": "another-client"},
        {"aud": None},
        {"iss": "https://another-issuer.example"},
        {"iss": None},
        {"exp": int(time.time()) - 120},
        {"exp": None},
        {"nonce": "not-the-one-sent"},
    ],
    ids=[
        "audience",
        "audiences",
        "authorized-party",
        "no-audience",
        "issuer",
        "no-issuer",
        "expired",
        "no-expiry",
        "nonce",
    ],
)
def test_a_token_not_for_this_site_is_refused(
    client: Client, desk: TokenDesk, claims: dict[str, Any]
) -> None:
    assert refused(client, callback(client, desk, **claims))


def test_a_token_a_little_past_its_expiry_is_taken_for_the_clocks_difference(
    client: Client, desk: TokenDesk
) -> None:
    answer = callback(
        client, desk, exp=int(time.time()) - 20, aud=[CLIENT_ID, "an-api"], azp=CLIENT_ID
    )
    assert answer["Location"] == "/"


def test_a_token_signed_with_another_key_is_refused(client: Client, desk: TokenDesk) -> None:
    stranger = TokenDesk()
    try:
        desk.signing_key = stranger.key
        answer = callback(client, desk)
    finally:
        stranger.close()
    assert refused(client, answer)


def test_groups_come_from_the_userinfo_when_the_id_token_has_none(
    client: Client, desk: TokenDesk
) -> None:
    desk.userinfo = {"sub": "desk-subject", "email": "grace@example.org", "groups": ["billing"]}
    answer = callback(client, desk)
    assert answer["Location"] == "/"
    assert list(User.objects.get().groups.values_list("name", flat=True)) == ["billing"]


def test_userinfo_about_someone_else_is_refused(client: Client, desk: TokenDesk) -> None:
    desk.userinfo = {"sub": "someone-else", "groups": ["billing"]}
    assert refused(client, callback(client, desk))


def test_the_groups_claim_and_the_team_patterns_are_the_operators(
    client: Client, desk: TokenDesk, settings: Any
) -> None:
    create_team(slug="eng-web", name="Web")
    settings.AGENT_OIDC_GROUPS_CLAIM = "roles"
    settings.AGENT_OIDC_TEAM_GROUPS = ["eng-*"]
    callback(client, desk, roles=["eng-web", "support"], groups=["billing"])
    assert list(User.objects.get().groups.values_list("name", flat=True)) == ["eng-web"]


def test_a_reference_to_too_many_groups_leaves_the_teams_as_they_were(
    client: Client, desk: TokenDesk
) -> None:
    callback(client, desk, groups=["support"])
    client.logout()
    # Microsoft Entra's "overage": no list, a reference to where it could be fetched.
    callback(client, desk, _claim_names={"groups": "src1"}, _claim_sources={"src1": {}})
    assert list(User.objects.get().groups.values_list("name", flat=True)) == ["support"]
    client.logout()
    callback(client, desk)  # no groups at all: no teams
    assert not User.objects.get().groups.exists()


def test_a_token_endpoint_that_refuses_the_code_sends_the_person_back_with_a_message(
    client: Client, desk: TokenDesk
) -> None:
    desk.token_status = 400
    assert refused(client, callback(client, desk), oidc.PROVIDER_ERROR)


def test_behind_tls_ended_at_a_proxy_the_callback_is_the_https_one(
    client: Client, desk: TokenDesk, settings: Any
) -> None:
    settings.SESSION_COOKIE_SECURE = True
    start = client.get("/oidc/authenticate/")
    params = authorization_params(start["Location"])
    assert params["redirect_uri"] == "https://testserver/oidc/callback/"
    desk.token(params["nonce"])
    answer = client.get("/oidc/callback/", {"code": "a-code", "state": params["state"]})
    assert answer["Location"] == "/"
    assert desk.token_requests[0]["redirect_uri"] == ["https://testserver/oidc/callback/"]


def test_the_discovery_document_is_read_once_per_issuer(
    client: Client, desk: TokenDesk, settings: Any
) -> None:
    forget_discovery()
    for _ in range(3):
        assert client.get("/oidc/authenticate/").status_code == 302
    assert desk.discovery_requests == 1

    other = TokenDesk()
    try:
        settings.AGENT_OIDC_ISSUER = other.issuer
        location = client.get("/oidc/authenticate/")["Location"]
        assert location.startswith(other.issuer + "/authorize?")
        assert other.discovery_requests == 1
    finally:
        other.close()


def test_a_discovery_document_of_another_issuer_is_not_followed(
    client: Client, desk: TokenDesk, settings: Any
) -> None:
    settings.AGENT_OIDC_ISSUER = desk.issuer.replace("127.0.0.1", "localhost")
    answer = client.get("/oidc/authenticate/")
    assert answer["Location"] == FAILED
    assert oidc.UNREACHABLE in client.get(FAILED).content.decode()


# ---- passwords for superusers alone ----------------------------------------------------------


def test_with_passwords_off_a_plain_password_is_refused_and_a_superusers_taken(
    client: Client, desk: TokenDesk, settings: Any
) -> None:
    settings.AGENT_PASSWORD_LOGIN = False
    User.objects.create_user("plain", password="plain-pass-123")
    User.objects.create_superuser("root", "", "root-pass-123")

    page = client.get("/accounts/login/").content.decode()
    assert 'href="/oidc/authenticate/"' in page
    assert "<summary>Superuser sign-in</summary>" in page

    form = {"username": "plain", "password": "plain-pass-123"}
    answer = client.post("/accounts/login/", form)
    assert answer.status_code == 200 and "_auth_user_id" not in client.session
    assert '<details class="auth-superuser" open>' in answer.content.decode()

    answer = client.post("/accounts/login/", {"username": "root", "password": "root-pass-123"})
    assert answer.status_code == 302 and client.get("/").status_code == 200

    settings.AGENT_PASSWORD_LOGIN = True
    client.logout()
    assert client.post("/accounts/login/", form).status_code == 302


def test_an_account_the_provider_provisioned_is_the_one_its_first_sign_in_finds(
    client: Client, desk: TokenDesk
) -> None:
    made = User.objects.create_user("grace", email="grace@example.com")
    SignInIdentity.objects.create(user=made, provider="scim", issuer="scim", subject="ext-1")
    answer = callback(client, desk, groups=["support"])

    assert answer["Location"] == "/"
    assert list(User.objects.values_list("username", flat=True)) == ["grace"]
    assert set(made.sign_in_identities.values_list("issuer", flat=True)) == {"scim", desk.issuer}


def test_a_local_account_of_the_same_name_is_not_taken_over(
    client: Client, desk: TokenDesk
) -> None:
    User.objects.create_user("grace", email="grace@example.com", password="local-pw-123")
    assert callback(client, desk)["Location"] == "/"
    assert sorted(User.objects.values_list("username", flat=True)) == ["grace", "grace-2"]


def test_a_provider_that_takes_the_secret_in_the_header_alone_gets_it_there(
    client: Client, desk: TokenDesk
) -> None:
    desk.auth_methods = ["client_secret_basic", "private_key_jwt"]
    assert callback(client, desk)["Location"] == "/"
    (asked,) = desk.token_requests
    assert "client_secret" not in asked
    expected = base64.b64encode(f"{CLIENT_ID}:desk-secret".encode()).decode()
    assert desk.token_authorizations == [f"Basic {expected}"]


def test_a_provider_that_takes_the_form_gets_the_secret_there(
    client: Client, desk: TokenDesk
) -> None:
    desk.auth_methods = ["client_secret_basic", "client_secret_post"]
    assert callback(client, desk)["Location"] == "/"
    assert desk.token_requests[0]["client_secret"] == ["desk-secret"]
    assert desk.token_authorizations == [None]


def test_a_public_client_sends_no_secret_and_proves_itself_with_pkce(
    client: Client, desk: TokenDesk, settings: Any
) -> None:
    settings.AGENT_OIDC_CLIENT_SECRET = ""
    desk.auth_methods = ["client_secret_basic", "none"]
    assert callback(client, desk)["Location"] == "/"
    (asked,) = desk.token_requests
    assert "client_secret" not in asked and asked["client_id"] == [CLIENT_ID]
    assert len(asked["code_verifier"][0]) >= 43
    assert desk.token_authorizations == [None]
