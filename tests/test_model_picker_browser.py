"""The chat header in a real headless Chromium against daphne: the model picker (the ids the
operator allows, the choice kept on the session for every tab and after a reload) and a long
title on a phone-sized screen."""

from __future__ import annotations

from typing import Any

import pytest

from tests.llm_server import ScriptedLLM
from tests.test_browser import ARTIFACTS, launch, log_in
from tests.test_browser import pytestmark as browser_marks

pytestmark = browser_marks

MODELS = ["openai/scripted", "openai/second"]
PHONE = {"width": 390, "height": 844}


@pytest.fixture
def site_env(site_env: dict[str, str]) -> dict[str, str]:
    """The operator lets users pick one model besides the default."""
    return {**site_env, "AGENT_MODELS": "openai/second"}


def browser_page(playwright: Any, viewport: dict[str, int]) -> Any:
    page = launch(playwright).new_context(viewport=viewport).new_page()
    page.set_default_timeout(20_000)
    return page


def ask(tab: Any, text: str) -> None:
    from playwright.sync_api import expect

    tab.fill("#composer", text)
    tab.press("#composer", "Enter")
    expect(tab.locator(".msg.user").last).to_have_text(text)
    expect(tab.locator("#send[data-state=send]")).to_be_visible()


def test_the_picked_model_is_the_sessions_in_every_tab_and_after_a_reload(
    live_site: str, llm: ScriptedLLM
) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        page = browser_page(playwright, {"width": 1200, "height": 800})
        log_in(page, live_site)
        picker = page.locator("#model-picker")
        expect(picker).to_be_visible()
        assert picker.locator("option").all_inner_texts() == MODELS
        expect(picker).to_have_value("openai/scripted")

        other = page.context.new_page()
        other.goto(page.url)
        expect(other.locator("#model-picker")).to_have_value("openai/scripted")

        picker.select_option("openai/second")
        expect(other.locator("#model-picker")).to_have_value("openai/second")
        llm.reply("from the second model")
        ask(page, "hello")
        expect(page.locator(".msg.assistant .msg-body").last).to_have_text("from the second model")
        assert [r["model"] for r in llm.requests] == ["second"]

        page.reload()
        expect(page.locator("#model-picker")).to_have_value("openai/second")

        # `/model NAME` typed in one tab moves the picker of every tab.
        ask(other, "/model openai/scripted")
        expect(page.locator("#model-picker")).to_have_value("openai/scripted")
        expect(other.locator("#model-picker")).to_have_value("openai/scripted")
        # The picker put nothing into the conversation (a command typed elsewhere is not
        # stored either).
        expect(page.locator(".msg.user")).to_have_text(["hello"])


def test_a_long_title_fits_a_phone(live_site: str, llm: ScriptedLLM) -> None:
    from playwright.sync_api import expect, sync_playwright

    title = "Supercalifragilistic" * 3 + " and a few more words to make it long"
    with sync_playwright() as playwright:
        page = browser_page(playwright, PHONE)
        log_in(page, live_site)
        llm.reply("ok")
        ask(page, title)
        shown = page.locator("#chat-title")
        expect(shown).to_have_text(title[:60].strip())
        expect(page.locator("#model-picker")).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        # The title is cut with an ellipsis inside the header, not pushed out of it.
        box = shown.bounding_box()
        assert box is not None and box["x"] + box["width"] <= PHONE["width"]
        assert shown.evaluate("(node) => node.scrollWidth > node.clientWidth")
        assert shown.evaluate("(node) => getComputedStyle(node).textOverflow") == "ellipsis"
        for control in ("#menu", "#model-picker", "#theme-toggle", "#send"):
            box = page.locator(control).bounding_box()
            assert box is not None and box["x"] + box["width"] <= PHONE["width"], control
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "phone.png"))

        # The chat list, opened as a drawer, cuts the same title too.
        page.click("#menu")
        item = page.locator("#session-list .session-title").first
        expect(item).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        box = item.bounding_box()
        assert box is not None and box["x"] + box["width"] <= PHONE["width"]
