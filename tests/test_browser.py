"""The chat page in a real headless Chromium, against a real daphne and the scripted model."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import LOGIN, ROOT
from tests.llm_server import ScriptedLLM

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(os.environ.get("TEST_ARTIFACTS", ROOT / "test-artifacts"))
USERNAME, PASSWORD = LOGIN

# Where it is missing, outside CI (which installs it and must not skip), say how to get it.
needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists() and not os.environ.get("CI"),
    reason="needs Debian's chromium (`apt-get install chromium`; .ci/run installs it)",
)
pytestmark = [pytest.mark.django_db(transaction=True), needs_chromium]


def launch(playwright: Any) -> Any:
    """Debian's Chromium, headless, with nothing of its own reaching the network."""
    return playwright.chromium.launch(
        executable_path=str(CHROMIUM),
        args=[
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ],
    )


@pytest.fixture
def page(live_site: str) -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch(playwright)
        # A context of its own, so that a test can open a second tab logged in as the first.
        context = browser.new_context(viewport={"width": 1200, "height": 800})
        page = context.new_page()
        page.set_default_timeout(20_000)
        yield page
        browser.close()


def log_in(page, live_site: str) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)  # CI machines are slower than a laptop
    page.goto(live_site + "/")
    expect(page).to_have_url(re.compile(r"/accounts/login/"))
    page.fill("input[name=username]", USERNAME)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    expect(page).to_have_url(re.compile(r"/c/[A-Za-z0-9_-]+/$"))
    expect(page.locator("#model-name")).to_have_text("openai/scripted")


def test_chat_in_a_browser(page, live_site: str, llm: ScriptedLLM, workspace: Path) -> None:
    from playwright.sync_api import expect

    log_in(page, live_site)

    llm.tool_call("write_file", {"path": "hello.txt", "content": "Hello World"})
    llm.reply("Done: **hello.txt** now says `Hello World`.", chunks=8)
    page.fill("#composer", "create hello.txt")
    page.press("#composer", "Enter")

    expect(page.locator(".msg.user").last).to_have_text("create hello.txt")
    card = page.locator(".tool-card[data-tool-name=write_file]")
    expect(card).to_have_count(1)
    expect(card).to_have_attribute("data-status", "done")
    answer = page.locator(".msg.assistant").last
    expect(answer).to_contain_text("Done: hello.txt now says Hello World.")
    expect(answer.locator("strong")).to_have_text("hello.txt")
    expect(page.locator("#thinking")).to_be_hidden()
    assert (workspace / "users" / USERNAME / "hello.txt").read_text() == "Hello World"
    # The chat takes its title from the first message, in the list and the header.
    expect(page.locator("#session-list li")).to_contain_text("create hello.txt")
    expect(page.locator("#chat-title")).to_have_text("create hello.txt")

    # A long turn, stopped from the page.
    llm.tool_call("exec", {"command": "sleep 30"})
    page.fill("#composer", "run something slow")
    page.press("#composer", "Enter")
    stop = page.locator("#send[data-state=stop]")
    expect(stop).to_be_visible()
    expect(page.locator(".tool-card[data-tool-name=exec]")).to_have_count(1)
    page.click("#send")
    expect(page.locator("#send[data-state=send]")).to_be_visible()
    expect(page.locator("#thinking")).to_be_hidden()
    # The stop says nothing in the conversation: the stopped turn's end is the answer.
    expect(page.locator(".msg", has_text="Stopped 1 task.")).to_have_count(0)
    expect(page.locator(".tool-card[data-tool-name=exec]")).to_have_attribute(
        "data-status", "error"
    )
    assert len(llm.requests) == 3  # nothing more was asked of the model after the stop

    expect(page.locator("#chat-title")).to_have_text("create hello.txt")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "chat.png"), full_page=True)

    # After a reload the conversation comes back from history.
    page.reload()
    expect(page.locator(".msg.user")).to_have_count(2)
    expect(page.locator(".msg.user").first).to_have_text("create hello.txt")
    expect(page.locator(".tool-card[data-tool-name=write_file]")).to_have_count(1)
    expect(page.locator(".msg.assistant", has_text="Done: hello.txt")).to_have_count(1)
    expect(page.locator("#session-list li")).to_have_count(1)
    expect(page.locator("#session-list li")).to_contain_text("create hello.txt")


@pytest.fixture
def one_turn_a_minute(site_env: dict[str, str]) -> None:
    site_env["AGENT_TURN_RATE"] = "1/min"


def test_a_refused_message_and_a_deleted_chat_in_a_browser(
    one_turn_a_minute: None, page, live_site: str, llm: ScriptedLLM
) -> None:
    from playwright.sync_api import expect

    log_in(page, live_site)
    llm.reply("first answer")
    page.fill("#composer", "first")
    page.press("#composer", "Enter")
    expect(page.locator(".msg.assistant").last).to_contain_text("first answer")

    # Past the rate limit the message is not taken: it goes back to the box.
    page.fill("#composer", "second, too soon")
    page.press("#composer", "Enter")
    expect(page.locator(".notice")).to_contain_text("too many messages")
    expect(page.locator("#composer")).to_have_value("second, too soon")
    expect(page.locator(".msg.user")).to_have_count(1)

    # Deleted from another tab, the chat says so here.
    other = page.context.new_page()
    other.goto(page.url)
    other.on("dialog", lambda dialog: dialog.accept())
    other.locator("#session-list .session-delete").first.click(force=True)
    expect(page.locator("#fatal")).to_have_text("This chat was deleted.")
    expect(page.locator("#composer")).to_be_disabled()
    assert len(llm.requests) == 1


def test_an_api_session_opens_from_the_list(page, live_site: str, llm: ScriptedLLM) -> None:
    from playwright.sync_api import expect

    log_in(page, live_site)
    llm.reply("made by a script")
    # A task sent through the API, as a script would, with the page's own login.
    status = page.evaluate(
        """async () => {
          const csrf = document.querySelector("input[name=csrfmiddlewaretoken]").value;
          const response = await fetch("/api/tasks", {
            method: "POST",
            headers: {"Content-Type": "application/json", "X-CSRFToken": csrf},
            body: JSON.stringify({prompt: "from a script", session: "api:job.1"}),
          });
          return (await response.json()).status;
        }"""
    )
    assert status == "succeeded"

    page.reload()
    item = page.locator("#session-list li[data-key='api:job.1']")
    expect(item).to_contain_text("from a script")
    expect(item.locator(".session-badge")).to_have_text("API")
    item.locator(".session-link").click()
    expect(page).to_have_url(re.compile(r"/c/api:job\.1/$"))
    expect(page.locator(".msg.assistant")).to_contain_text("made by a script")

    # The page goes on with it, and a reload opens it again at the same address.
    llm.reply("continued on the page")
    page.fill("#composer", "and one more thing")
    page.press("#composer", "Enter")
    expect(page.locator(".msg.assistant").last).to_contain_text("continued on the page")
    page.reload()
    expect(page.locator(".msg.user")).to_have_count(2)
    expect(page.locator("#chat-title")).to_have_text("from a script")
    expect(page.locator("#session-list li.active")).to_have_attribute("data-key", "api:job.1")


def test_a_tab_opened_mid_reply_and_a_stopped_reply_in_a_browser(
    page, live_site: str, llm: ScriptedLLM
) -> None:
    from playwright.sync_api import expect

    log_in(page, live_site)
    story = " ".join(f"word{n}" for n in range(40))
    llm.reply(story, chunks=40, chunk_delay=0.15)
    page.fill("#composer", "tell me a story")
    page.press("#composer", "Enter")
    streaming = page.locator(".msg.assistant.streaming")
    expect(streaming).to_contain_text("word3")

    # A second tab on the same chat shows what was said so far at once, then the rest.
    other = page.context.new_page()
    other.goto(page.url)
    expect(other.locator(".msg.user")).to_have_text("tell me a story")
    joined = other.locator(".msg.assistant.streaming")
    expect(joined).to_contain_text("word0 word1 word2 word3", timeout=3_000)
    expect(joined).to_contain_text("word12")

    # Stopped from the second tab: both keep the text so far, marked stopped.
    other.click("#send[data-state=stop]")
    for tab in (page, other):
        expect(tab.locator("#send[data-state=send]")).to_be_visible()
        expect(tab.locator(".msg.assistant .msg-stopped")).to_have_count(1)
    said = other.locator(".msg.assistant").first.locator(".msg-body").inner_text()
    assert said.startswith("word0 word1") and not said.endswith("word39")

    page.reload()
    reply = page.locator(".msg.assistant").first
    expect(reply.locator(".msg-stopped")).to_have_text("stopped")
    assert reply.locator(".msg-body").inner_text() == said
