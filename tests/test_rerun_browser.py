"""Regenerating the last reply and editing a message in a real headless Chromium, against a
real daphne: the page's buttons and editor, a second tab that follows, a reload that agrees,
the archived messages kept on record, and no buttons while a turn runs."""

from __future__ import annotations

from typing import Any

from tests.llm_server import ScriptedLLM
from tests.test_browser import ARTIFACTS, log_in, page  # noqa: F401  (the `page` fixture)
from tests.test_browser import pytestmark as browser_marks

pytestmark = browser_marks

SHOWN = """() => Array.from(document.querySelectorAll("#messages > .msg"),
  (node) => [node.dataset.role, node.querySelector(".msg-body").innerText.trim()])"""


def ask(tab: Any, text: str, answer: str) -> None:
    from playwright.sync_api import expect

    tab.fill("#composer", text)
    tab.press("#composer", "Enter")
    expect(tab.locator(".msg.user").last).to_have_text(text)
    expect(tab.locator(".msg.assistant").last).to_contain_text(answer)
    expect(tab.locator("#send[data-state=send]")).to_be_visible()


def shows(tab: Any, expected: list[list[str]]) -> None:
    from playwright.sync_api import expect

    expect(tab.locator("#messages > .msg")).to_have_count(len(expected))
    expect(tab.locator("#send[data-state=send]")).to_be_visible()
    expect(tab.locator("#messages > .msg").last).to_contain_text(expected[-1][1])
    assert tab.evaluate(SHOWN) == expected


def test_regenerate_and_edit_in_two_tabs(
    page: Any,  # noqa: F811
    live_site: str,
    llm: ScriptedLLM,
) -> None:
    from playwright.sync_api import expect

    log_in(page, live_site)
    llm.reply("First answer.")
    ask(page, "first question", "First answer.")
    llm.reply("Second answer.")
    ask(page, "second question", "Second answer.")
    other = page.context.new_page()
    other.goto(page.url)
    shows(
        other,
        [
            ["user", "first question"],
            ["assistant", "First answer."],
            ["user", "second question"],
            ["assistant", "Second answer."],
        ],
    )

    # Regenerate is offered on the last reply only.
    replies = page.locator(".msg.assistant")
    expect(replies.first.locator(".msg-regenerate")).to_be_hidden()
    replies.last.hover()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "regenerate.png"))
    llm.reply("Second answer, again.")
    replies.last.locator(".msg-regenerate").click()
    regenerated = [
        ["user", "first question"],
        ["assistant", "First answer."],
        ["user", "second question"],
        ["assistant", "Second answer, again."],
    ]
    for tab in (page, other):
        shows(tab, regenerated)
    # The model was asked again without the reply it replaced.
    asked = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "assistant"]
    assert asked == ["First answer."]

    # Edit the first message from the second tab: an editor in its place.
    first = other.locator(".msg.user").first
    first.hover()
    first.locator(".msg-edit").click()
    editor = other.locator(".msg-editor textarea")
    expect(editor).to_have_value("first question")
    expect(first).to_be_hidden()
    editor.fill("first question, put better")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    other.screenshot(path=str(ARTIFACTS / "edit.png"))
    llm.reply("A better first answer.")
    editor.press("Enter")
    # It drops the later messages: said first, sent on a yes.
    other.locator(".edit-warning .edit-confirm").click()
    edited = [["user", "first question, put better"], ["assistant", "A better first answer."]]
    for tab in (other, page):
        shows(tab, edited)
    expect(other.locator(".msg-editor")).to_have_count(0)
    page.reload()
    shows(page, edited)

    # Nothing was deleted: the API lists what was archived, marked.
    listed = page.request.get(f"{live_site}/api/sessions").json()
    key = listed[0]["key"]
    messages = page.request.get(f"{live_site}/api/sessions/{key}/messages").json()
    assert [(m["content"], m["archived"]) for m in messages] == [
        ("first question", True),
        ("First answer.", True),
        ("second question", True),
        ("Second answer.", True),
        ("second question", True),
        ("Second answer, again.", True),
        ("first question, put better", False),
        ("A better first answer.", False),
    ]

    # Cancel leaves the message as it was.
    bubble = page.locator(".msg.user").first
    bubble.hover()
    bubble.locator(".msg-edit").click()
    page.locator(".msg-editor textarea").fill("never sent")
    page.locator(".msg-editor .edit-cancel").click()
    expect(page.locator(".msg-editor")).to_have_count(0)
    shows(page, edited)

    # While a turn runs there is nothing to edit or regenerate.
    llm.hang(30)
    page.fill("#composer", "a slow one")
    page.press("#composer", "Enter")
    expect(page.locator("#send[data-state=stop]")).to_be_visible()
    expect(page.locator(".msg-edit:visible, .msg-regenerate:visible")).to_have_count(0)
    page.click("#send")
    expect(page.locator("#send[data-state=send]")).to_be_visible()


def test_a_refused_edit_keeps_the_editor_open(
    page: Any,  # noqa: F811
    live_site: str,
    llm: ScriptedLLM,
) -> None:
    from playwright.sync_api import expect

    log_in(page, live_site)
    llm.reply("An answer.")
    ask(page, "a question", "An answer.")
    bubble = page.locator(".msg.user").first
    bubble.hover()
    bubble.locator(".msg-edit").click()
    editor = page.locator(".msg-editor textarea")
    # A command is not something a message can be edited into.
    editor.fill("/new")
    editor.press("Enter")
    page.locator(".edit-warning .edit-confirm").click()
    expect(page.locator(".notice")).to_contain_text("cannot be a command")
    expect(editor).to_be_enabled()
    expect(editor).to_have_value("/new")
    shows(page, [["user", "a question"], ["assistant", "An answer."]])
    assert len(llm.requests) == 1
