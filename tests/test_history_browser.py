"""A reloaded chat in a real headless Chromium shows what the live chat showed: each model
call's thinking, folded, and a message the agent sent with the `message` tool, once."""

from __future__ import annotations

from typing import Any

from tests.llm_server import ScriptedLLM
from tests.test_browser import log_in, page  # noqa: F401  (the `page` fixture)
from tests.test_browser import pytestmark as browser_marks

pytestmark = browser_marks

# What the conversation shows, in order: each bubble, thinking block and tool card with its
# text (a card by its tool's name), as the person reads it.
SHOWN = """() => Array.from(document.querySelectorAll("#messages > *"), (node) => {
  if (node.matches(".thinking-block")) return ["thinking", node.querySelector(".thinking-text").textContent];
  if (node.matches(".tool-card")) return ["tool", node.dataset.toolName];
  if (node.matches(".msg")) return [node.dataset.role, node.querySelector(".msg-body").innerText.trim()];
  return [node.className, node.textContent.trim()];
})"""


def ask(tab: Any, text: str) -> None:
    from playwright.sync_api import expect

    tab.fill("#composer", text)
    tab.press("#composer", "Enter")
    expect(tab.locator(".msg.user").last).to_have_text(text)
    expect(tab.locator("#send[data-state=send]")).to_be_visible()
    expect(tab.locator("#thinking")).to_be_hidden()


def test_a_reload_shows_the_thinking_and_the_message_as_they_were_shown_live(
    page: Any,  # noqa: F811
    live_site: str,
    llm: ScriptedLLM,
) -> None:
    from playwright.sync_api import expect

    log_in(page, live_site)
    llm.tool_call(
        "message", {"content": "Half of the files are done."}, reasoning="I report progress first."
    )
    llm.reply("All done.", reasoning="Then I answer.")
    ask(page, "convert them")
    expect(page.locator(".msg.assistant .msg-body").last).to_have_text("All done.")

    llm.tool_call("message", {"content": "The answer is **42**."})
    llm.reply("The answer is **42**.", reasoning="I said it already.")
    ask(page, "what is the answer?")
    expect(page.locator(".thinking-block")).to_have_count(3)
    page.wait_for_timeout(1_000)  # nothing more comes: no reply repeats the message
    live = page.evaluate(SHOWN)

    assert live == [
        ["user", "convert them"],
        ["thinking", "I report progress first."],
        ["tool", "message"],
        ["assistant", "Half of the files are done."],
        ["thinking", "Then I answer."],
        ["assistant", "All done."],
        ["user", "what is the answer?"],
        ["tool", "message"],
        ["assistant", "The answer is 42."],
        ["thinking", "I said it already."],
    ]
    # Folded once its call has said or done something.
    expect(page.locator(".thinking-block[open]")).to_have_count(0)

    page.reload()
    expect(page.locator(".msg.user")).to_have_count(2)
    assert page.evaluate(SHOWN) == live
    expect(page.locator(".thinking-block[open]")).to_have_count(0)
    thinking = page.locator(".thinking-block").first
    expect(thinking.locator(".thinking-text")).to_be_hidden()
    thinking.locator("summary").click()
    expect(thinking.locator(".thinking-text")).to_have_text("I report progress first.")
