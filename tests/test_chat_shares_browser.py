"""A shared chat in a real headless Chromium against a real daphne: its owner shares it with a
team from the chat page's Share dialog; a member of the team opens the link, sees the chat
with its tool card, read-only, and continues it in a chat of their own, which shows the
messages and goes on from them; a stranger gets a 404. Nothing breaks the
Content-Security-Policy."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.conftest import LOGIN, run_manage
from tests.llm_server import ScriptedLLM
from tests.test_browser import log_in, page  # noqa: F401  (the `page` fixture)
from tests.test_browser import pytestmark as browser_marks
from tests.test_csp import RECORD_VIOLATIONS

pytestmark = browser_marks

MEMBER = ("bea", "pw-bea-shares-123")
STRANGER = ("dan", "pw-dan-shares-123")

MAKE_TEAM = f"""
from django.contrib.auth.models import User
from teams_app.services import create_team, set_members
owner = User.objects.get(username={LOGIN[0]!r})
bea = User.objects.create_user({MEMBER[0]!r}, password={MEMBER[1]!r}, first_name="Bea")
User.objects.create_user({STRANGER[0]!r}, password={STRANGER[1]!r})
team = create_team(slug="support", name="Support desk")
set_members(team=team, users=[owner, bea])
"""


@pytest.fixture
def team(live_site: str, site_env: dict[str, str]) -> None:
    done = run_manage(site_env, "shell", "-c", MAKE_TEAM)
    assert done.returncode == 0, done.stderr


def sign_in(browser: Any, live_site: str, username: str, password: str) -> Any:
    """A page of a browser context of its own, signed in as `username`."""
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1200, "height": 800})
    context.add_init_script(RECORD_VIOLATIONS)
    tab = context.new_page()
    tab.set_default_timeout(20_000)
    tab.goto(live_site + "/accounts/login/")
    tab.fill("input[name=username]", username)
    tab.fill("input[name=password]", password)
    tab.click("button[type=submit]")
    expect(tab).to_have_url(re.compile(r"/c/[A-Za-z0-9_-]+/$"))
    return tab


def test_a_team_member_reads_a_shared_chat_and_continues_it(
    team: None,
    page: Any,  # noqa: F811
    live_site: str,
    llm: ScriptedLLM,
) -> None:
    from playwright.sync_api import expect

    # The owner's chat: a tool call, its result, a reply.
    page.add_init_script(RECORD_VIOLATIONS)
    log_in(page, live_site)
    llm.tool_call("write_file", {"path": "hello.txt", "content": "Hello World"})
    llm.reply("Done: **hello.txt** says `Hello World`.")
    page.fill("#composer", "create hello.txt")
    page.press("#composer", "Enter")
    expect(page.locator(".msg.assistant .msg-body").last).to_contain_text("Done: hello.txt")
    expect(page.locator(".tool-card[data-status=done]")).to_have_count(1)

    # Shared with the team from the header's Share dialog.
    page.click("#share-open")
    dialog = page.locator("#share-dialog")
    expect(dialog).to_be_visible()
    dialog.get_by_label("Support desk").check()
    dialog.get_by_role("button", name="Share", exact=True).click()
    link = dialog.locator("#share-link")
    expect(link).to_be_visible()
    expect(dialog.locator("#share-result-text")).to_contain_text(
        "Shared with the team Support desk."
    )
    url = link.input_value()
    assert re.fullmatch(rf"{re.escape(live_site)}/shared/[A-Za-z0-9_-]{{16,}}/", url), url
    dialog.get_by_role("button", name="Done").click()
    expect(dialog).to_be_hidden()
    assert page.evaluate("window.__violations") == []

    # A member of the team reads it, read-only, with its tool card.
    member = sign_in(page.context.browser, live_site, *MEMBER)
    member.goto(url)
    expect(member.locator("#shared-by")).to_contain_text(f"Shared by {LOGIN[0]} on")
    expect(member.locator("#shared-title")).to_have_text("create hello.txt")
    card = member.locator(".tool-card[data-tool-name=write_file]")
    expect(card).to_have_attribute("data-status", "done")
    card.locator("summary").click()
    expect(card.locator(".tool-result")).to_be_visible()
    expect(member.locator(".msg.user")).to_have_text("create hello.txt")
    expect(member.locator(".msg.assistant .msg-body")).to_contain_text("Done: hello.txt")
    assert member.locator("#composer").count() == 0  # nothing to write in

    # Continued: a chat of the member's own that shows the messages and goes on from them.
    member.get_by_role("button", name="Continue in my own chat").click()
    expect(member).to_have_url(re.compile(r"/c/[0-9a-f]{32}/$"))
    expect(member.locator("#chat-title")).to_have_text("create hello.txt (continued)")
    expect(member.locator(".msg.user").first).to_have_text("create hello.txt")
    expect(member.locator(".tool-card[data-tool-name=write_file]")).to_have_attribute(
        "data-status", "done"
    )
    expect(member.locator(".msg.assistant .msg-body").first).to_contain_text("Done: hello.txt")
    llm.reply("It says Hello World.")
    member.fill("#composer", "what does it say?")
    member.press("#composer", "Enter")
    expect(member.locator(".msg.assistant .msg-body").last).to_have_text("It says Hello World.")
    sent = llm.requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert member.evaluate("window.__violations") == []

    # Anyone else: the site's 404, as for no share at all.
    stranger = sign_in(page.context.browser, live_site, *STRANGER)
    answer = stranger.goto(url)
    assert answer is not None and answer.status == 404
    assert stranger.locator("#shared-snapshot").count() == 0


def test_sharing_a_chat_that_says_nothing_yet_says_so(
    team: None,
    page: Any,  # noqa: F811
    live_site: str,
) -> None:
    from playwright.sync_api import expect

    log_in(page, live_site)
    page.click("#share-open")
    dialog = page.locator("#share-dialog")
    dialog.get_by_role("button", name="Share", exact=True).click()
    expect(dialog.locator("#share-error")).to_have_text(
        "Tick a team or name a person to share the chat with."
    )
    dialog.locator("#share-people").fill("bea")
    dialog.get_by_role("button", name="Share", exact=True).click()
    expect(dialog.locator("#share-error")).to_have_text("This chat has no messages to share yet.")
