"""Sign-in through the organisation's OpenID Connect provider: a real provider (node's
oidc-provider, `tests/oidc_provider`) reached over HTTP, with the browser's part played by
an HTTP client, and the site answering in this process so that the test can look at whom it
made and which teams they are in. The browser's own test is test_oidc_browser.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User
from django.test import Client

from agentsite.signin import oidc
from teams_app.models import SignInIdentity
from teams_app.services import create_team
from tests.conftest import free_port
from tests.oidc_provider import (
    ADA,
    ADA_PASSWORD,
    CLIENT_ID,
    CLIENT_SECRET,
    NodeProvider,
    cancel_at_provider,
    node_provider,
    through_provider,
)

pytestmark = pytest.mark.django_db
SITE = "http://testserver"
FAILED = "/accounts/login/?provider_failed=1"


@pytest.fixture
def provider(tmp_path: Path, settings: Any) -> Iterator[NodeProvider]:
    for running in node_provider(tmp_path, SITE + "/oidc/callback/"):
        settings.AGENT_OIDC_ISSUER = running.issuer
        settings.AGENT_OIDC_CLIENT_ID = CLIENT_ID
        settings.AGENT_OIDC_CLIENT_SECRET = CLIENT_SECRET
        yield running


@pytest.fixture
def teams() -> None:
    create_team(slug="support", name="Support")
    create_team(slug="billing", name="Billing")


def sign_in(
    client: Client, username: str = "ada", password: str = ADA_PASSWORD, next_url: str = ""
) -> Any:
    """Through the provider's button, its sign-in form and back: the callback's answer."""
    start = client.get("/oidc/authenticate/", {"next": next_url} if next_url else {})
    assert start.status_code == 302, start.content[:500]
    with httpx.Client(timeout=20) as browser:
        back = through_provider(
            start["Location"], username, password, back_to=SITE + "/", browser=browser
        )
    return client.get(back.removeprefix(SITE))


def signed_in_as(client: Client) -> str | None:
    """Whom the chat page opens for, if anyone."""
    if client.get("/").status_code != 200:
        return None
    return User.objects.get(pk=client.session["_auth_user_id"]).username


def teams_of(username: str) -> list[str]:
    user = User.objects.get(username=username)
    return sorted(user.groups.values_list("team__slug", flat=True))


def page_text(client: Client, url: str) -> str:
    return client.get(url).content.decode()


def test_the_first_sign_in_makes_the_person_with_the_team_their_groups_name(
    client: Client, provider: NodeProvider, teams: None
) -> None:
    answer = sign_in(client)

    assert answer.status_code == 302 and answer["Location"] == "/"
    assert signed_in_as(client) == "ada"
    ada = User.objects.get(username="ada")
    assert (ada.email, ada.first_name, ada.last_name) == ("ada@example.org", "Ada", "Lovelace")
    assert not ada.has_usable_password() and not ada.is_staff
    assert teams_of("ada") == ["support"]
    identity = SignInIdentity.objects.get(user=ada)
    assert (identity.issuer, identity.subject, identity.provider) == (
        provider.issuer,
        ADA["sub"],
        "oidc",
    )


def test_groups_changed_at_the_provider_move_the_membership_at_the_next_sign_in(
    client: Client, provider: NodeProvider, teams: None
) -> None:
    by_hand = create_team(slug="research", name="Research", synced=False)
    sign_in(client)
    ada = User.objects.get(username="ada")
    ada.groups.add(by_hand.group)
    client.logout()

    provider.set_groups("ada", ["billing", "not-a-team"])
    accounts = provider.accounts
    accounts["ada"]["email"] = "ada.lovelace@example.org"
    provider.accounts = accounts
    sign_in(client)

    assert signed_in_as(client) == "ada"
    assert User.objects.count() == 1
    # The team set by hand stays: sign-ins leave it alone.
    assert teams_of("ada") == ["billing", "research"]
    assert User.objects.get(username="ada").email == "ada.lovelace@example.org"

    provider.set_groups("ada", [])
    client.logout()
    sign_in(client)
    assert teams_of("ada") == ["research"]


def test_a_local_account_with_the_same_name_and_address_is_not_taken_over(
    client: Client, provider: NodeProvider
) -> None:
    local = User.objects.create_user(
        "Ada", email="ada@example.org", password="local-pass-123", is_staff=True
    )

    sign_in(client)

    assert signed_in_as(client) == "ada-2"
    assert not SignInIdentity.objects.filter(user=local).exists()
    assert User.objects.get(username="ada-2").sign_in_identities.get().subject == ADA["sub"]
    client.logout()
    sign_in(client)  # found again by the provider's subject
    assert signed_in_as(client) == "ada-2"
    assert User.objects.count() == 2


def test_a_person_deactivated_here_is_refused_and_their_login_ends(
    client: Client, provider: NodeProvider
) -> None:
    sign_in(client)
    User.objects.filter(username="ada").update(is_active=False)

    # Their login from before no longer opens anything.
    assert client.get("/")["Location"].startswith("/accounts/login/")
    answer = sign_in(client)
    assert answer.status_code == 302 and answer["Location"] == FAILED
    assert signed_in_as(client) is None
    assert oidc.DEACTIVATED in page_text(client, FAILED)


def test_a_sign_in_cancelled_at_the_provider_lands_on_the_sign_in_page_with_a_message(
    client: Client, provider: NodeProvider
) -> None:
    start = client.get("/oidc/authenticate/")
    with httpx.Client(timeout=20) as browser:
        back = cancel_at_provider(start["Location"], back_to=SITE + "/", browser=browser)
    assert "error=access_denied" in back
    answer = client.get(back.removeprefix(SITE))

    assert answer.status_code == 302 and answer["Location"] == FAILED
    assert signed_in_as(client) is None and not User.objects.exists()
    assert oidc.DECLINED in page_text(client, FAILED)


def test_the_place_asked_for_is_where_the_sign_in_ends(
    client: Client, provider: NodeProvider
) -> None:
    answer = sign_in(client, next_url="/admin/")
    assert answer["Location"] == "/admin/"
    # One elsewhere is not followed.
    client.logout()
    assert sign_in(client, next_url="https://elsewhere.example/")["Location"] == "/"


def test_the_provider_wants_pkce_and_the_site_sends_it(
    client: Client, provider: NodeProvider
) -> None:
    start = client.get("/oidc/authenticate/")
    location = start["Location"]
    assert location.startswith(provider.issuer + "/auth?")
    assert "code_challenge_method=S256" in location and "nonce=" in location
    # The same request without its challenge is refused by the provider.
    bare = location.replace("code_challenge_method=S256", "").split("&code_challenge=")[0]
    with httpx.Client(timeout=20) as browser:
        refused = browser.get(bare)
    assert refused.is_redirect and "error=invalid_request" in refused.headers["location"]


def test_the_sign_in_page_leads_to_the_provider_and_keeps_next(
    client: Client, provider: NodeProvider, settings: Any
) -> None:
    settings.AGENT_OIDC_BUTTON = "Sign in with Example Corp"
    page = page_text(client, "/accounts/login/?next=/c/abc/")
    assert "Sign in with Example Corp" in page
    assert 'href="/oidc/authenticate/?next=%2Fc%2Fabc%2F"' in page
    assert 'name="password"' in page and "Superuser sign-in" not in page


# ---- no provider, or one away ------------------------------------------------------------------


def test_without_a_provider_its_addresses_answer_404_and_the_page_has_no_button(
    client: Client, settings: Any
) -> None:
    settings.AGENT_OIDC_ISSUER = ""
    for url in ("/oidc/authenticate/", "/oidc/callback/?code=c&state=s"):
        answer = client.get(url)
        assert answer.status_code == 404
        assert "Traceback" not in answer.content.decode()
    page = page_text(client, "/accounts/login/")
    assert "/oidc/authenticate/" not in page and 'name="password"' in page


def test_a_provider_that_cannot_be_reached_sends_the_person_back_with_a_message(
    client: Client, settings: Any
) -> None:
    settings.AGENT_OIDC_ISSUER = f"http://127.0.0.1:{free_port()}"
    settings.AGENT_OIDC_CLIENT_ID = CLIENT_ID

    answer = client.get("/oidc/authenticate/")

    assert answer.status_code == 302 and answer["Location"] == FAILED
    assert oidc.UNREACHABLE in page_text(client, FAILED)


def test_a_provider_that_goes_away_after_the_redirect_sends_the_person_back_with_a_message(
    client: Client, provider: NodeProvider
) -> None:
    start = client.get("/oidc/authenticate/")
    with httpx.Client(timeout=20) as browser:
        back = through_provider(
            start["Location"], "ada", ADA_PASSWORD, back_to=SITE + "/", browser=browser
        )
    provider.stop()
    oidc_token_endpoint_gone = client.get(back.removeprefix(SITE))

    assert oidc_token_endpoint_gone["Location"] == FAILED
    assert oidc.PROVIDER_ERROR in page_text(client, FAILED)
    assert signed_in_as(client) is None


def test_a_callback_used_twice_is_refused_plainly(client: Client, provider: NodeProvider) -> None:
    start = client.get("/oidc/authenticate/")
    with httpx.Client(timeout=20) as browser:
        back = through_provider(
            start["Location"], "ada", ADA_PASSWORD, back_to=SITE + "/", browser=browser
        )
    assert client.get(back.removeprefix(SITE))["Location"] == "/"
    client.logout()
    client.get("/oidc/authenticate/")  # a state of its own in the new session
    again = client.get(back.removeprefix(SITE))
    assert again["Location"] == FAILED
    assert oidc.EXPIRED in page_text(client, FAILED)
