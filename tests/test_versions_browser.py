"""Earlier versions of a conversation in a real headless Chromium, against a real daphne: an
edit that drops later messages says so and waits for a yes, the edited message and a
regenerated reply get a `‹ k/N ›` switch that shows the version they replaced (with what
followed it), a reload and a second tab agree, and editing the first message renames the
chat."""

from __future__ import annotations

from typing import Any

from tests.llm_server import ScriptedLLM
from tests.test_browser import ARTIFACTS, log_in, page  # noqa: F401  (the `page` fixture)
from tests.test_browser import pytestmark as browser_marks
from tests.test_rerun_browser import ask, shows

pytestmark = browser_marks

VIEW = """() => Array.from(document.querySelectorAll(".version-view > .msg"),
  (node) => [node.dataset.role, node.querySelector(".msg-body").innerText.trim()])"""


def test_an_edit_keeps_the_version_it_replaced(
    page: Any,  # noqa: F811
    live_site: str,
    llm: ScriptedLLM,
) -> None:
    from playwright.sync_api import expect

    log_in(page, live_site)
    llm.reply("Paris.")
    ask(page, "capital of France", "Paris.")
    llm.reply("Berlin.")
    ask(page, "capital of Germany", "Berlin.")
    expect(page.locator(".session-title").first).to_have_text("capital of France")
    other = page.context.new_page()
    other.goto(page.url)
    expect(other.locator("#messages > .msg")).to_have_count(4)
    expect(page.locator(".version-switch")).to_have_count(0)

    # Editing the first message says what it drops, and sends nothing until told to.
    first = page.locator(".msg.user").first
    first.hover()
    first.locator(".msg-edit").click()
    editor = page.locator(".msg-editor textarea")
    editor.fill("capital of Italy")
    editor.press("Enter")
    warning = page.locator(".edit-warning")
    expect(warning).to_contain_text("drops the 3 later messages")
    expect(warning).to_contain_text("‹ ›")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "versions-warning.png"))
    assert len(llm.requests) == 2
    # Keep editing: the warning goes, the editor stays.
    warning.locator(".edit-keep").click()
    expect(warning).to_have_count(0)
    expect(editor).to_have_value("capital of Italy")
    assert len(llm.requests) == 2
    llm.reply("Rome.")
    editor.press("Enter")
    page.locator(".edit-warning .edit-confirm").click()
    edited = [["user", "capital of Italy"], ["assistant", "Rome."]]
    for tab in (page, other):
        shows(tab, edited)
        expect(tab.locator("#messages > .msg.user .version-label")).to_have_text("2/2")

    # The chat is named after its first message, edited: here, in the other tab, in the list.
    for tab in (page, other):
        expect(tab.locator(".session-title").first).to_have_text("capital of Italy")
        expect(tab.locator("#chat-title")).to_have_text("capital of Italy")

    def earlier_version_shows(tab: Any) -> None:
        tab.locator("#messages > .msg.user .version-prev").click()
        expect(tab.locator(".version-view .version-label")).to_have_text("1/2")
        expect(tab.locator(".version-view > .msg")).to_have_count(4)
        assert tab.evaluate(VIEW) == [
            ["user", "capital of France"],
            ["assistant", "Paris."],
            ["user", "capital of Germany"],
            ["assistant", "Berlin."],
        ]
        # Read-only, in place of the live conversation.
        expect(tab.locator("#messages > .msg").first).to_be_hidden()
        rewinds = tab.locator(".version-view .msg-edit, .version-view .msg-regenerate")
        expect(rewinds).to_have_count(0)
        tab.locator(".version-view .version-next").click()
        expect(tab.locator(".version-view")).to_have_count(0)
        shows(tab, edited)
        expect(tab.locator("#messages > .msg.user .version-label")).to_have_text("2/2")

    earlier_version_shows(page)
    page.screenshot(path=str(ARTIFACTS / "versions-live.png"))
    earlier_version_shows(other)
    page.reload()
    shows(page, edited)
    earlier_version_shows(page)

    # The model was asked the edited question alone.
    said = [m for m in llm.requests[-1]["messages"] if m["role"] != "system"]
    assert [m["role"] for m in said] == ["user"]
    assert said[0]["content"].endswith("capital of Italy")


def test_a_regenerated_reply_keeps_the_one_it_replaced(
    page: Any,  # noqa: F811
    live_site: str,
    llm: ScriptedLLM,
) -> None:
    from playwright.sync_api import expect

    log_in(page, live_site)
    llm.reply("Madrid.")
    ask(page, "capital of Spain", "Madrid.")
    llm.reply("Madrid, again.")
    reply = page.locator(".msg.assistant").last
    reply.hover()
    reply.locator(".msg-regenerate").click()
    regenerated = [["user", "capital of Spain"], ["assistant", "Madrid, again."]]
    shows(page, regenerated)
    # Not on the message, which says what it said: on the reply.
    expect(page.locator(".msg.user .version-switch")).to_have_count(0)
    expect(page.locator("#messages > .msg.assistant .version-label")).to_have_text("2/2")
    expect(page.locator(".session-title").first).to_have_text("capital of Spain")

    for _ in range(2):  # as the regeneration left it, then after a reload
        page.locator("#messages > .msg.assistant .version-prev").click()
        expect(page.locator(".version-view .msg.assistant .version-label")).to_have_text("1/2")
        assert page.evaluate(VIEW) == [["user", "capital of Spain"], ["assistant", "Madrid."]]
        page.screenshot(path=str(ARTIFACTS / "versions-reply.png"))
        page.locator(".version-view .version-next").click()
        expect(page.locator(".version-view")).to_have_count(0)
        shows(page, regenerated)
        page.reload()
        shows(page, regenerated)
        expect(page.locator("#messages > .msg.assistant .version-label")).to_have_text("2/2")

    # A new message shows the live conversation and carries on from it.
    page.locator("#messages > .msg.assistant .version-prev").click()
    expect(page.locator(".version-view")).to_have_count(1)
    llm.reply("Lisbon.")
    ask(page, "capital of Portugal", "Lisbon.")
    expect(page.locator(".version-view")).to_have_count(0)
    shows(
        page,
        [
            ["user", "capital of Spain"],
            ["assistant", "Madrid, again."],
            ["user", "capital of Portugal"],
            ["assistant", "Lisbon."],
        ],
    )
