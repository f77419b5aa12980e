"""The approval card of the chat page in a real headless Chromium: a tool call that waits
for the user shows a card in every tab of the chat; Allow in one tab runs the call, and the
card goes in both."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import LOGIN
from tests.llm_server import ScriptedLLM
from tests.test_browser import ARTIFACTS, log_in, page  # noqa: F401  (the `page` fixture)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def site_env(site_env: dict[str, str]) -> dict[str, str]:
    return {**site_env, "AGENT_APPROVE_TOOLS": "write_file"}


def test_allow_on_the_card_runs_the_call_and_the_card_goes_in_every_tab(
    page,  # noqa: F811
    live_site: str,
    llm: ScriptedLLM,
    workspace: Path,
) -> None:
    from playwright.sync_api import expect

    log_in(page, live_site)
    llm.tool_call("write_file", {"path": "ok.txt", "content": "approved"})
    llm.reply("Wrote **ok.txt**.")
    page.fill("#composer", "write ok.txt")
    page.press("#composer", "Enter")

    card = page.locator(".approval-card[data-tool-name=write_file]")
    expect(card).to_have_count(1)
    expect(card).to_contain_text("ok.txt")
    expect(card.locator(".approval-args")).to_contain_text('"content": "approved"')
    # The turn waits for the answer: the composer's button stops it.
    expect(page.locator("#send[data-state=stop]")).to_be_visible()
    assert not (workspace / "users" / LOGIN[0] / "ok.txt").exists()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "approval.png"))

    # A second tab of the chat is asked too, and answers for both.
    other = page.context.new_page()
    other.goto(page.url)
    theirs = other.locator(".approval-card[data-tool-name=write_file]")
    expect(theirs).to_have_count(1)
    theirs.get_by_role("button", name="Allow", exact=True).click()

    for tab in (page, other):
        expect(tab.locator(".approval-card")).to_have_count(0)
        expect(tab.locator(".msg.assistant", has_text="Wrote ok.txt.")).to_have_count(1)
        expect(tab.locator(".tool-card[data-tool-name=write_file]")).to_have_attribute(
            "data-status", "done"
        )
    assert (workspace / "users" / LOGIN[0] / "ok.txt").read_text() == "approved"

    # Deny in the first tab: the model is told, and the card goes.
    llm.tool_call("write_file", {"path": "no.txt", "content": "no"}).reply("Left it alone.")
    page.fill("#composer", "write no.txt")
    page.press("#composer", "Enter")
    page.locator(".approval-card").get_by_role("button", name="Deny").click()
    for tab in (page, other):
        expect(tab.locator(".msg.assistant", has_text="Left it alone.")).to_have_count(1)
        expect(tab.locator(".approval-card")).to_have_count(0)
    assert not (workspace / "users" / LOGIN[0] / "no.txt").exists()
    declined = [m for m in llm.requests[-1]["messages"] if m["role"] == "tool"][-1]
    assert declined["content"].startswith("Error: the user declined write_file(")
