"""The chat page's settings in a real headless Chromium against a real daphne: a token made
there is shown once with a copy button, works at the API, is listed with its last use and
is revoked after a confirmation; "You and your teams" says who the person is, their team
and where each part of their policy came from; the dialog fits a phone's screen and breaks
nothing of the Content-Security-Policy."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from tests.conftest import LOGIN, run_manage
from tests.test_browser import log_in, page  # noqa: F401  (the `page` fixture)
from tests.test_browser import pytestmark as browser_marks
from tests.test_csp import RECORD_VIOLATIONS

pytestmark = browser_marks


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def test_a_token_made_in_the_settings_is_shown_once_works_and_is_revoked(
    page: Any,  # noqa: F811
    live_site: str,
) -> None:
    from playwright.sync_api import expect

    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.add_init_script(RECORD_VIOLATIONS)
    log_in(page, live_site)
    dialog = page.locator("#settings")
    expect(dialog).to_be_hidden()
    page.click("#settings-open")
    expect(dialog).to_be_visible()
    expect(page.get_by_role("tab", name="API tokens")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#token-empty")).to_have_text("You have no API tokens.")

    # A name is asked for before anything is sent.
    page.click("#token-create")
    expect(page.locator("#tokens-error")).to_contain_text("Give the token a name")

    page.fill("#token-name", "deploy script")
    page.select_option("#token-expiry", "30")
    page.click("#token-create")
    box = page.locator("#token-secret")
    expect(box).to_be_visible()
    expect(box).to_contain_text("you will not see it again")
    expect(page.locator("#tokens-error")).to_be_hidden()
    secret = page.input_value("#token-secret-value")
    assert re.fullmatch(r"ast_[A-Za-z0-9_-]{40,}", secret), secret
    box.get_by_role("button", name="Copy the new token").click()
    expect(box.locator(".copy-label")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == secret

    item = page.locator(".token-item", has_text="deploy script")
    expect(item).to_have_count(1)
    expect(item.locator(".token-prefix")).to_have_text(f"{secret[:8]}…")
    expect(item.locator(".token-expires")).to_contain_text("Expires ")
    expect(item.locator(".token-used")).to_have_text("Never used")
    assert secret not in page.locator("#token-list").inner_text()

    # The secret works; the list, read again, says when it was used.
    with httpx.Client(base_url=live_site, timeout=30) as client:
        assert client.get("/api/tokens", headers=bearer(secret)).status_code == 200
    # Closed, the secret is gone from the page: it was shown once.
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    assert page.input_value("#token-secret-value") == ""
    page.click("#settings-open")
    expect(box).to_be_hidden()
    expect(item.locator(".token-used")).to_contain_text("Last used ")

    # Revoked only once confirmed.
    item.get_by_role("button", name="Revoke deploy script").click()
    confirm = page.locator(".confirm-dialog")
    expect(confirm).to_contain_text("Revoke the token “deploy script”?")
    confirm.get_by_role("button", name="Cancel").click()
    expect(confirm).to_have_count(0)
    expect(item).to_have_count(1)
    item.get_by_role("button", name="Revoke deploy script").click()
    confirm.get_by_role("button", name="Revoke").click()
    expect(item).to_have_count(0)
    expect(page.locator("#token-empty")).to_be_visible()
    with httpx.Client(base_url=live_site, timeout=30) as client:
        assert client.get("/api/tokens", headers=bearer(secret)).status_code == 401

    assert page.evaluate("window.__violations") == []


MAKE_TEAM = f"""
from decimal import Decimal
from django.contrib.auth.models import User
from teams_app.services import create_team, set_admins
me = User.objects.get(username={LOGIN[0]!r})
me.first_name, me.last_name, me.email = "Tess", "Ter", "tess@example.com"
me.save()
team = create_team(
    slug="support", name="Support desk", tools=["read_file", "write_file"],
    approve_tools=["write_file"], member_daily_budget=Decimal("2.50"),
    team_daily_budget=Decimal("40"), turn_rate="10/min",
)
set_admins(team=team, users=[me])
"""


@pytest.fixture
def in_a_team(live_site: str, site_env: dict[str, str]) -> None:
    done = run_manage(site_env, "shell", "-c", MAKE_TEAM)
    assert done.returncode == 0, done.stderr


def test_you_and_your_teams_says_where_each_part_came_from(
    in_a_team: None,
    page: Any,  # noqa: F811
    live_site: str,
) -> None:
    from playwright.sync_api import expect

    page.add_init_script(RECORD_VIOLATIONS)
    log_in(page, live_site)
    page.click("#settings-open")
    tab = page.get_by_role("tab", name="You and your teams")
    tab.click()
    expect(tab).to_have_attribute("aria-selected", "true")
    expect(page.locator("#settings-tokens")).to_be_hidden()
    body = page.locator("#me-body")
    facts = body.locator(".me-facts")
    expect(facts).to_contain_text(LOGIN[0])
    expect(facts).to_contain_text("Tess Ter")
    expect(facts).to_contain_text("tess@example.com")
    expect(facts).to_contain_text("Superuser")
    team = body.locator(".me-team")
    expect(team).to_have_count(1)
    expect(team).to_contain_text("Support desk")
    expect(team.locator(".me-team-slug")).to_have_text("support")
    expect(team.locator(".me-admin")).to_have_text("team admin")

    def rule(label: str) -> Any:
        return body.locator(".me-rule", has=page.locator("dt", has_text=label))

    expect(rule("Models").locator(".me-value")).to_have_text("openai/scripted")
    expect(rule("Models").locator(".me-source")).to_have_text("site setting")
    expect(rule("Tools").first.locator(".me-value")).to_have_text("read_file, write_file")
    expect(rule("Tools").first.locator(".me-source")).to_have_text("from your team Support desk")
    waits = rule("Tools that wait for your yes").locator("li", has_text="write_file")
    expect(waits.locator(".me-source")).to_have_text("from your team Support desk")
    expect(rule("Your daily budget").locator(".me-value")).to_have_text("$2.50 a day (UTC)")
    expect(rule("Team daily budget").locator(".me-value")).to_contain_text("$40.00 a day")
    expect(rule("Turns").locator(".me-value")).to_have_text("10 turns a minute")
    expect(rule("Turns").locator(".me-source")).to_have_text("from your team Support desk")
    expect(rule("Network for commands").locator(".me-source")).to_have_text("site setting")

    # The arrow keys move between the tabs.
    tab.press("ArrowLeft")
    expect(page.get_by_role("tab", name="API tokens")).to_be_focused()
    expect(page.locator("#settings-tokens")).to_be_visible()
    assert page.evaluate("window.__violations") == []


def test_the_settings_fit_a_phone(page: Any, live_site: str) -> None:  # noqa: F811
    from playwright.sync_api import expect

    log_in(page, live_site)
    page.set_viewport_size({"width": 360, "height": 700})
    page.click("#settings-open")
    dialog = page.locator("#settings")
    expect(dialog).to_be_visible()
    page.fill("#token-name", "a phone's token with a rather long name that has to wrap somewhere")
    page.click("#token-create")
    expect(page.locator("#token-secret")).to_be_visible()
    expect(page.locator(".token-item")).to_have_count(1)
    box = dialog.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 360
    # Nothing sticks out sideways: every part of the dialog ends within the screen.
    outside = page.evaluate(
        """() => [...document.querySelectorAll('#settings *')]
          .filter((node) => node.getClientRects().length
            && node.getBoundingClientRect().right > window.innerWidth + 0.5)
          .map((node) => node.id || node.className)"""
    )
    assert outside == []
    for selector in ("#token-create", ".token-revoke", "#settings-close"):
        part = page.locator(selector).bounding_box()
        assert part is not None and part["x"] + part["width"] <= 360, selector
