"""Details of the chat page and the admin, in a real headless Chromium against a real daphne
and the scripted model: a reply names its model and time on hover, the chat's total is
whole in the header at every width, a right-aligned table column is right-aligned, an
attached file is a chip that can be taken off, a tool card's arguments and result can be
copied, and the admin opens a session (and a run's session) in the chat and its lists fit
the window."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.llm_server import ScriptedLLM
from tests.test_browser import log_in, page  # noqa: F401  (the `page` fixture)
from tests.test_browser import pytestmark as browser_marks

pytestmark = browser_marks

# A first message of unbroken words: the chat's title and its messages are as long and as
# hard to wrap as they come.
LONG = "Tabulate-" + "prices-of-every-fruit-in-the-market-" * 6
TABLE = "| fruit | price |\n|:--|--:|\n| apples | 4.20 |\n| figs | 12.00 |"
TIME = re.compile(r"\d{1,2}:\d{2}")

# The element's box against the window's and its own content: whether any of it is cut.
BOX = """(selector) => {
  const node = document.querySelector(selector);
  const box = node.getBoundingClientRect();
  return {left: box.left, right: box.right, top: box.top, bottom: box.bottom,
          width: innerWidth, height: innerHeight,
          cut: node.scrollWidth > node.clientWidth || node.scrollHeight > node.clientHeight,
          shown: getComputedStyle(node).display !== "none" && box.width > 0};
}"""


def send(tab: Any, text: str) -> None:
    tab.fill("#composer", text)
    tab.press("#composer", "Enter")


def assert_whole_in_window(tab: Any, selector: str) -> None:
    box = tab.evaluate(BOX, selector)
    assert box["shown"], box
    assert box["left"] >= 0 and box["right"] <= box["width"], box
    assert box["top"] >= 0 and box["bottom"] <= box["height"], box
    assert not box["cut"], box


def test_replies_their_total_their_tables_and_tool_cards(
    page: Any,  # noqa: F811
    live_site: str,
    llm: ScriptedLLM,
) -> None:
    from playwright.sync_api import expect

    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_site)
    log_in(page, live_site)
    llm.tool_call("list_dir", {"path": "."}).reply(TABLE)
    send(page, LONG)
    reply = page.locator(".msg.assistant").last
    expect(reply.locator("table")).to_be_visible()
    expect(page.locator("#thinking")).to_be_hidden()

    # Hovered, the reply says which model wrote it and when.
    reply.hover()
    meta = reply.locator(".msg-meta")
    expect(meta).to_be_visible()
    expect(meta).to_contain_text("openai/scripted")
    assert TIME.search(meta.inner_text()), meta.inner_text()
    expect(reply.locator(".msg-actions")).to_have_css("opacity", "1")

    # The price column is right-aligned as the markdown says; the fruit column is not.
    align = "(n) => getComputedStyle(n).textAlign"
    assert reply.locator("td").nth(1).evaluate(align) == "right"
    assert reply.locator("th").nth(1).evaluate(align) == "right"
    assert reply.locator("td").nth(0).evaluate(align) in ("left", "start")

    # The tool card's arguments and result, each copied whole.
    card = page.locator(".tool-card[data-tool-name=list_dir]")
    expect(card).to_have_attribute("data-status", "done")
    card.locator("summary").click()
    copy_arguments = card.get_by_role("button", name="Copy the arguments")
    copy_arguments.click()
    expect(copy_arguments).to_contain_text("Copied")
    assert json.loads(page.evaluate("navigator.clipboard.readText()")) == {"path": "."}
    card.get_by_role("button", name="Copy the result").click()
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied and copied == card.locator(".tool-result").inner_text()

    # The chat's total, whole in the header beside a title that has to give way.
    usage = page.locator("#chat-usage")
    expect(usage).to_contain_text("tokens")
    page.set_viewport_size({"width": 1000, "height": 700})
    expect(usage).to_contain_text("This chat:")
    assert_whole_in_window(page, "#chat-usage")
    box = usage.bounding_box()
    assert box["x"] + box["width"] <= links_left(page)
    # And on a phone, in the header above the conversation.
    page.set_viewport_size({"width": 390, "height": 740})
    assert_whole_in_window(page, "#chat-usage")
    header = page.locator(".topbar").bounding_box()
    box = usage.bounding_box()
    assert box["y"] + box["height"] <= header["y"] + header["height"]
    assert box["x"] + box["width"] <= links_left(page)

    # Opened again, the stored reply still names its model and time.
    page.set_viewport_size({"width": 1200, "height": 800})
    page.reload()
    reply = page.locator(".msg.assistant").last
    expect(reply.locator("table")).to_be_visible()
    reply.hover()
    expect(reply.locator(".msg-meta")).to_contain_text("openai/scripted")
    assert TIME.search(reply.locator(".msg-meta").inner_text())
    assert "openai/scripted" in (reply.locator(".msg-meta").get_attribute("title") or "")


def links_left(tab: Any) -> float:
    """Where the header's account links begin: the total ends before them."""
    return float(tab.locator(".top-links").bounding_box()["x"])


def test_an_attached_file_is_a_chip_that_can_be_taken_off(
    page: Any,  # noqa: F811
    live_site: str,
    llm: ScriptedLLM,
    tmp_path: Path,
) -> None:
    from playwright.sync_api import expect

    log_in(page, live_site)
    first, second = tmp_path / "first.csv", tmp_path / "second.csv"
    first.write_text("a,1\n")
    second.write_text("b,2\n")
    chips = page.locator("#attachments .attachment")
    page.set_input_files("#attach-input", str(first))
    expect(chips).to_have_count(1)
    page.set_input_files("#attach-input", str(second))
    expect(chips).to_have_count(2)
    expect(chips.nth(0)).to_contain_text("first.csv")
    expect(chips.nth(1)).to_contain_text("second.csv")
    expect(page.locator("#composer")).to_have_value("")

    page.get_by_role("button", name="Remove first.csv").click()
    expect(chips).to_have_count(1)
    expect(page.locator("#attachments")).not_to_contain_text("first.csv")

    llm.reply("Got it.")
    send(page, "Sum this up")
    expect(page.locator(".msg.assistant").last).to_contain_text("Got it.")
    expect(chips).to_have_count(0)
    expect(page.locator("#attachments")).to_be_hidden()
    said = [m for m in llm.requests[-1]["messages"] if m["role"] == "user"][-1]["content"]
    said = said if isinstance(said, str) else json.dumps(said)
    assert "Sum this up" in said and "Attached: uploads/second.csv" in said
    assert "first.csv" not in said
    expect(page.locator(".msg.user").last).not_to_contain_text("first.csv")


# Whether anything of a list is wider than its window or the box it is in.
WIDER = """() => [document.documentElement, ...document.querySelectorAll(".results")]
  .filter((node) => node.scrollWidth > node.clientWidth)
  .map((node) => [node.className || node.tagName, node.scrollWidth, node.clientWidth])"""


def test_the_admin_opens_sessions_in_the_chat_and_its_lists_fit(
    page: Any,  # noqa: F811
    live_site: str,
    llm: ScriptedLLM,
) -> None:
    from playwright.sync_api import expect

    log_in(page, live_site)
    llm.tool_call("list_dir", {"path": "."}).reply("Listed " + "x" * 150)
    send(page, LONG)
    expect(page.locator(".msg.assistant").last).to_contain_text("Listed")
    expect(page.locator("#thinking")).to_be_hidden()
    chat_path = re.sub(r"^https?://[^/]+", "", page.url)

    page.set_viewport_size({"width": 1400, "height": 900})
    for model in ("session", "message", "run"):
        page.goto(f"{live_site}/admin/sessions_app/{model}/")
        expect(page.locator("#result_list tbody tr").first).to_be_visible()
        assert page.evaluate(WIDER) == [], model

    # The session's list and its page open its chat.
    page.goto(f"{live_site}/admin/sessions_app/session/")
    listed = page.locator("#result_list a.open-in-chat")
    expect(listed).to_have_count(1)
    assert listed.get_attribute("href") == chat_path
    page.locator("#result_list tbody tr th a").first.click()
    link = page.get_by_role("link", name="Open in chat")
    expect(link).to_have_attribute("href", chat_path)
    link.click()
    expect(page).to_have_url(live_site + chat_path)
    expect(page.locator(".msg.assistant").last).to_contain_text("Listed")

    # A run's page opens its session's chat.
    page.goto(f"{live_site}/admin/sessions_app/run/")
    page.locator("#result_list tbody tr th a").first.click()
    link = page.get_by_role("link", name="Open in chat")
    expect(link).to_have_attribute("href", chat_path)
    link.click()
    expect(page.locator(".msg.user").first).to_contain_text("Tabulate")
