"""Sign-in through the organisation's OpenID Connect provider in a real headless Chromium:
the site on daphne, the provider node's oidc-provider (tests/oidc_provider), both on
loopback. From the sign-in page's button to the provider's form and back into the chat; the
provider's groups make and move team memberships; a person deactivated here is refused;
with passwords for superusers alone, the password form waits behind a disclosure."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentsite.signin import oidc
from tests.conftest import LOGIN, free_port, run_manage
from tests.oidc_provider import (
    ADA,
    ADA_PASSWORD,
    CLIENT_ID,
    CLIENT_SECRET,
    NodeProvider,
    ensure_installed,
)
from tests.test_browser import ARTIFACTS, needs_chromium, page  # noqa: F401  (the fixture)
from tests.test_socket_revocation_live import SiteRecords

pytestmark = [pytest.mark.django_db(transaction=True), needs_chromium]
BUTTON = "Sign in with Example Corp"
CHAT = re.compile(r"/c/[A-Za-z0-9_-]+/$")


@pytest.fixture(autouse=True)
def provider_port(site_env: dict[str, str]) -> int:
    """The provider's port, in the site's settings before the site starts."""
    ensure_installed()
    port = free_port()
    site_env.update(
        {
            "AGENT_OIDC_ISSUER": f"http://127.0.0.1:{port}",
            "AGENT_OIDC_CLIENT_ID": CLIENT_ID,
            "AGENT_OIDC_CLIENT_SECRET": CLIENT_SECRET,
            "AGENT_OIDC_BUTTON": BUTTON,
        }
    )
    return port


@pytest.fixture
def provider(live_site: str, provider_port: int, tmp_path: Path) -> Iterator[NodeProvider]:
    folder = tmp_path / "provider"
    folder.mkdir()
    running = NodeProvider(
        folder, live_site + "/oidc/callback/", {"ada": dict(ADA)}, port=provider_port
    ).start()
    try:
        yield running
    finally:
        running.stop()


def shell(site_env: dict[str, str], code: str) -> None:
    done = run_manage(site_env, "shell", "-c", code)
    assert done.returncode == 0, done.stderr


def teams_of(site_env: dict[str, str], username: str) -> list[str]:
    rows = SiteRecords(site_env).rows(
        "SELECT g.name FROM auth_group g JOIN auth_user_groups ug ON ug.group_id = g.id"
        " JOIN auth_user u ON u.id = ug.user_id WHERE u.username = ? ORDER BY g.name",
        username,
    )
    return [name for (name,) in rows]


def at_the_provider(tab: Any, provider: NodeProvider, live_site: str) -> None:
    """From the site's sign-in page to the provider's form."""
    from playwright.sync_api import expect

    tab.goto(live_site + "/accounts/login/")
    tab.get_by_role("link", name=BUTTON).click()
    expect(tab).to_have_url(re.compile("^" + re.escape(provider.issuer) + "/interaction/"))


def sign_in(tab: Any, provider: NodeProvider, live_site: str) -> None:
    at_the_provider(tab, provider, live_site)
    tab.fill("input[name=username]", "ada")
    tab.fill("input[name=password]", ADA_PASSWORD)
    tab.click("button[value=login]")


def test_signing_in_at_the_provider_opens_the_chat_and_its_groups_make_the_teams(
    page: Any,  # noqa: F811
    provider: NodeProvider,
    live_site: str,
    site_env: dict[str, str],
) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)
    shell(
        site_env,
        "from teams_app.services import create_team; "
        "create_team(slug='support', name='Support'); create_team(slug='billing', name='Billing')",
    )

    # Cancelled at the provider: back on the sign-in page, told so.
    at_the_provider(page, provider, live_site)
    page.click("button[value=cancel]")
    expect(page).to_have_url(re.compile(r"/accounts/login/\?provider_failed=1$"))
    expect(page.get_by_role("alert")).to_have_text(oidc.DECLINED)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "sign-in-cancelled.png"))

    sign_in(page, provider, live_site)
    expect(page).to_have_url(CHAT)
    expect(page.locator("#model-name")).to_have_text("openai/scripted")
    assert teams_of(site_env, "ada") == ["support"]

    # Moved to another group at the provider: the next sign-in moves the membership.
    provider.set_groups("ada", ["billing"])
    page.context.clear_cookies()
    sign_in(page, provider, live_site)
    expect(page).to_have_url(CHAT)
    assert teams_of(site_env, "ada") == ["billing"]

    # Deactivated here, as the admin would: the provider's yes is not enough.
    shell(
        site_env,
        "from django.contrib.auth.models import User; u = User.objects.get(username='ada'); "
        "u.is_active = False; u.save()",
    )
    page.context.clear_cookies()
    sign_in(page, provider, live_site)
    expect(page).to_have_url(re.compile(r"/accounts/login/\?provider_failed=1$"))
    expect(page.get_by_role("alert")).to_have_text(oidc.DEACTIVATED)
    page.goto(live_site + "/")
    expect(page).to_have_url(re.compile(r"/accounts/login/"))


@pytest.fixture
def passwords_off(site_env: dict[str, str]) -> None:
    site_env["AGENT_PASSWORD_LOGIN"] = "false"


def test_with_passwords_off_the_page_leads_to_the_provider_and_keeps_a_superusers_door(
    passwords_off: None,
    page: Any,  # noqa: F811
    provider: NodeProvider,
    live_site: str,
    site_env: dict[str, str],
) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)
    shell(
        site_env,
        "from django.contrib.auth.models import User; "
        "User.objects.create_user('plain', password='plain-pass-123')",
    )
    page.goto(live_site + "/accounts/login/?next=/")
    expect(page.get_by_role("link", name=BUTTON)).to_be_visible()
    expect(page.locator("input[name=password]")).to_be_hidden()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "sign-in-provider.png"))

    page.get_by_text("Superuser sign-in").click()
    page.fill("input[name=username]", "plain")
    page.fill("input[name=password]", "plain-pass-123")
    page.click("form.auth-form button[type=submit]")
    expect(page.get_by_role("alert")).to_be_visible()
    # The form stays open after a refusal, for another try.
    expect(page.locator("input[name=password]")).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "sign-in-superuser.png"))

    page.fill("input[name=username]", LOGIN[0])
    page.fill("input[name=password]", LOGIN[1])
    page.click("form.auth-form button[type=submit]")
    expect(page).to_have_url(CHAT)
