"""The chat page around a tool call that waits for the user, in a real headless Chromium
against daphne and the scripted model: the composer's button stops the waiting turn, a
reload shows the call once, a message typed meanwhile asks first, and an "always" shows
in the header, where a click takes it back. Also the composer itself: Send only with
something to send, and Escape stops a reply being written."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import LOGIN
from tests.llm_server import ScriptedLLM
from tests.test_browser import log_in, page  # noqa: F401  (the `page` fixture)

pytestmark = pytest.mark.django_db(transaction=True)

LONG = " ".join(f"word{n}" for n in range(240))


@pytest.fixture
def site_env(site_env: dict[str, str]) -> dict[str, str]:
    return {**site_env, "AGENT_APPROVE_TOOLS": "write_file"}


def folder(workspace: Path) -> Path:
    return workspace / "users" / LOGIN[0]


def tool_messages(llm: ScriptedLLM) -> list[str]:
    return [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"]


def ask_to_write(tab: Any, llm: ScriptedLLM, name: str) -> Any:
    """Send a message whose answer calls write_file, and wait for its card."""
    from playwright.sync_api import expect

    llm.tool_call("write_file", {"path": name, "content": name})
    tab.fill("#composer", f"write {name}")
    tab.press("#composer", "Enter")
    card = tab.locator(".approval-card[data-tool-name=write_file]")
    expect(card).to_have_count(1)
    expect(card).to_contain_text(name)
    return card


def test_a_reload_shows_the_waiting_call_once_and_stop_declines_it(
    page: Any,  # noqa: F811
    live_site: str,
    llm: ScriptedLLM,
    workspace: Path,
) -> None:
    from playwright.sync_api import expect

    log_in(page, live_site)
    ask_to_write(page, llm, "one.txt")
    # The turn waits: the button stops it, as it stops a turn that runs.
    expect(page.locator("#send[data-state=stop]")).to_be_enabled()
    expect(page.locator(".tool-card")).to_have_count(0)

    # After a reload the stored answer names the call too: one card shows it, the question.
    page.reload()
    expect(page.locator(".approval-card")).to_have_count(1)
    expect(page.locator(".tool-card[data-tool-name=write_file]")).to_be_hidden()
    expect(page.locator(".approval-card, .tool-card").filter(visible=True)).to_have_count(1)
    expect(page.locator("#send[data-state=stop]")).to_be_enabled()

    page.locator("#send").click()
    expect(page.locator(".approval-card")).to_have_count(0)
    expect(page.locator("#send[data-state=send]")).to_be_visible()
    # The stop's own answer is no reply of the conversation's.
    expect(page.get_by_text("Stopped 1 task.")).to_have_count(0)
    # Nothing more comes of the call: no card saying it has no result.
    expect(page.locator(".tool-card").filter(visible=True)).to_have_count(0)
    assert not (folder(workspace) / "one.txt").exists()
    asked = len(llm.requests)

    # The turn ended: the model heard nothing more of it until the next message, which
    # shows it the call declined.
    llm.reply("Understood.")
    page.fill("#composer", "fine")
    page.press("#composer", "Enter")
    expect(page.locator(".msg.assistant", has_text="Understood.")).to_have_count(1)
    assert len(llm.requests) == asked + 1
    assert tool_messages(llm) == ["Error: the turn was stopped before this tool ran."]
    page.reload()
    declined = page.locator(".tool-card[data-tool-name=write_file]")
    expect(declined).to_have_attribute("data-status", "error")
    expect(declined).to_be_visible()


def test_a_message_typed_while_a_call_waits_asks_first(
    page: Any,  # noqa: F811
    live_site: str,
    llm: ScriptedLLM,
    workspace: Path,
) -> None:
    from playwright.sync_api import expect

    log_in(page, live_site)
    card = ask_to_write(page, llm, "two.txt")
    dialog = page.locator("dialog.confirm-dialog")

    # A command that leaves the call waiting goes without a question.
    page.fill("#composer", "/help")
    page.press("#composer", "Enter")
    expect(page.get_by_text("/new — archive this conversation")).to_have_count(1)
    expect(dialog).to_have_count(0)
    expect(card).to_have_count(1)

    page.fill("#composer", "never mind")
    page.press("#composer", "Enter")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text(
        "A tool call is waiting for your answer: send anyway and decline it?"
    )
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_have_count(0)
    expect(card).to_have_count(1)
    expect(page.locator("#composer")).to_have_value("never mind")
    expect(page.locator(".msg.user", has_text="never mind")).to_have_count(0)

    # Escape closes the question as Cancel does, and leaves the waiting call alone.
    page.press("#composer", "Enter")
    expect(dialog).to_be_visible()
    page.keyboard.press("Escape")
    expect(dialog).to_have_count(0)
    expect(card).to_have_count(1)
    expect(page.locator("#send[data-state=stop]")).to_be_enabled()

    llm.reply("Left it.")
    page.press("#composer", "Enter")
    dialog.get_by_role("button", name="Send").click()
    expect(card).to_have_count(0)
    expect(page.locator(".msg.user", has_text="never mind")).to_have_count(1)
    expect(page.locator(".msg.assistant", has_text="Left it.")).to_have_count(1)
    expect(page.locator("#composer")).to_have_value("")
    assert tool_messages(llm)[-1].startswith("Error: the user sent a new message instead")
    assert not (folder(workspace) / "two.txt").exists()


def test_an_always_shows_in_the_header_and_a_click_takes_it_back(
    page: Any,  # noqa: F811
    live_site: str,
    llm: ScriptedLLM,
    workspace: Path,
) -> None:
    from playwright.sync_api import expect

    log_in(page, live_site)
    badge = page.locator("#always-list .always-badge[data-tool=write_file]")
    expect(page.locator("#always-list")).to_be_hidden()
    card = ask_to_write(page, llm, "a.txt")
    llm.reply("Wrote a.")
    card.get_by_role("button", name="Always for this chat").click()
    expect(page.locator(".msg.assistant", has_text="Wrote a.")).to_have_count(1)
    expect(badge).to_have_text(re.compile(r"always allowed:\s*write_file"))
    # Another tab of the chat shows it as it opens.
    other = page.context.new_page()
    other.goto(page.url)
    theirs = other.locator("#always-list .always-badge[data-tool=write_file]")
    expect(theirs).to_be_visible()

    # Allowed: the next call runs unasked.
    llm.tool_call("write_file", {"path": "b.txt", "content": "b"}).reply("Wrote b.")
    page.fill("#composer", "write b.txt")
    page.press("#composer", "Enter")
    expect(page.locator(".msg.assistant", has_text="Wrote b.")).to_have_count(1)
    assert (folder(workspace) / "b.txt").read_text() == "b"

    badge.click()
    expect(badge).to_have_count(0)
    expect(page.locator("#always-list")).to_be_hidden()
    expect(theirs).to_have_count(0)  # every tab hears it
    key = "web:" + page.url.rstrip("/").rsplit("/", 1)[1]
    session = page.request.get(f"{live_site}/api/sessions/{key}").json()
    assert session["allowed_tools"] == []

    # Taken back: the next call of it asks again.
    ask_to_write(page, llm, "c.txt")
    assert not (folder(workspace) / "c.txt").exists()
    other.close()


def test_send_needs_something_to_send_and_escape_stops_a_reply(
    page: Any,  # noqa: F811
    live_site: str,
    llm: ScriptedLLM,
    tmp_path: Path,
) -> None:
    from playwright.sync_api import expect

    log_in(page, live_site)
    send = page.locator("#send")
    expect(send).to_be_disabled()
    page.fill("#composer", "  \n\t ")
    expect(send).to_be_disabled()
    page.fill("#composer", "hello")
    expect(send).to_be_enabled()
    page.fill("#composer", "")
    expect(send).to_be_disabled()
    # An attachment alone is something to send.
    chosen = tmp_path / "notes.txt"
    chosen.write_text("notes")
    page.set_input_files("#attach-input", str(chosen))
    expect(page.locator("#attachments .attachment-name")).to_have_text("notes.txt")
    expect(page.locator("#composer")).to_have_value("")
    expect(send).to_be_enabled()
    # Taken off again: nothing to send.
    page.locator("#attachments .attachment-remove").click()
    expect(page.locator("#attachments .attachment")).to_have_count(0)
    expect(send).to_be_disabled()

    # Escape while a reply is being written stops it there; the part said stays.
    llm.reply(LONG, chunks=40, chunk_delay=0.15)
    page.fill("#composer", "tell me a long story")
    send.click()
    reply = page.locator(".msg.assistant", has_text="word0 word1")
    expect(reply).to_contain_text("word20")
    expect(send).to_have_attribute("data-state", "stop")
    page.locator("#scroller").click()  # focus in the page, not in the box
    page.keyboard.press("Escape")
    expect(reply).to_have_attribute("data-stopped", "true")
    expect(send).to_have_attribute("data-state", "send")
    expect(send).to_be_disabled()
    expect(page.locator(".msg.assistant", has_text="Stopped 1 task.")).to_have_count(0)
    assert "word239" not in reply.inner_text()
