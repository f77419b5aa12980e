"""What a chat cost, on the page in a real headless Chromium: a line under each reply with its
run's tokens and cost, live and after a reload, the chat's total in the header, and a
message refused past the daily budget."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.llm_server import ScriptedLLM
from tests.test_browser import log_in, page  # noqa: F401  (the `page` fixture)
from tests.test_browser import pytestmark as browser_marks

pytestmark = browser_marks

USAGE = {"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500}


@pytest.fixture
def priced(site_env: dict[str, str]) -> None:
    site_env["AGENT_MODEL_PRICES"] = json.dumps({"openai/scripted": {"input": 0.5, "output": 1.5}})
    site_env["AGENT_USER_DAILY_BUDGET"] = "0.0025"  # two calls' worth


def test_each_reply_shows_what_it_cost_and_the_chat_its_total(
    priced: None,
    page: Any,  # noqa: F811
    live_site: str,
    llm: ScriptedLLM,
) -> None:
    from playwright.sync_api import expect

    log_in(page, live_site)
    llm.reply("Streamed answer.", usage=USAGE)
    page.fill("#composer", "first")
    page.press("#composer", "Enter")
    first = page.locator(".msg.assistant", has_text="Streamed answer.")
    expect(first.locator(".msg-usage")).to_have_text("1,500 tokens · $0.00125")
    expect(page.locator("#chat-usage")).to_have_text("This chat: 1,500 tokens · $0.00125")

    llm.reply("Second answer.", usage=USAGE)
    page.fill("#composer", "second")
    page.press("#composer", "Enter")
    second = page.locator(".msg.assistant", has_text="Second answer.")
    expect(second.locator(".msg-usage")).to_have_text("1,500 tokens · $0.00125")
    expect(page.locator("#chat-usage")).to_have_text("This chat: 3,000 tokens · $0.0025")

    # Past the budget the message is not taken, and the page says why.
    page.fill("#composer", "third")
    page.press("#composer", "Enter")
    expect(page.locator(".notice-error")).to_contain_text(
        "Your daily budget of $0.0025 is spent ($0.0025 since 00:00 UTC)"
    )
    expect(page.locator("#composer")).to_have_value("third")
    assert len(llm.requests) == 2

    page.reload()
    expect(page.locator(".msg.assistant")).to_have_count(2)
    expect(page.locator(".msg-usage")).to_have_text(["1,500 tokens · $0.00125"] * 2)
    expect(page.locator("#chat-usage")).to_have_text("This chat: 3,000 tokens · $0.0025")
