"""Failed and stopped turns in a real headless Chromium, against a real daphne and the
scripted model: a failure shows as an error with a Retry button (live and after a reload),
never as an answer with a token line; Retry answers it afresh; the retries before it are
notes of their own; a stopped reply keeps its mark and gets no reply of the stop's."""

from __future__ import annotations

from typing import Any

import pytest

from tests.llm_server import ScriptedLLM
from tests.test_browser import ARTIFACTS, log_in, page  # noqa: F401  (the `page` fixture)
from tests.test_browser import pytestmark as browser_marks

pytestmark = browser_marks

FAILED = "The model server failed (HTTP 503). Try again in a moment."
STORY = "Once upon a time there was a very long answer that nobody waited for."


@pytest.fixture
def site_env(site_env: dict[str, str]) -> dict[str, str]:
    # Two quick retries, then the turn gives up.
    site_env["AGENT_LLM_MAX_RETRIES"] = "2"
    return site_env


def send(tab: Any, text: str) -> None:
    from playwright.sync_api import expect

    tab.fill("#composer", text)
    tab.press("#composer", "Enter")
    expect(tab.locator(".msg.user").last).to_have_text(text)


def test_a_failed_turn_is_an_error_that_retry_answers(
    page: Any,  # noqa: F811
    live_site: str,
    llm: ScriptedLLM,
) -> None:
    from playwright.sync_api import expect

    log_in(page, live_site)
    for _ in range(3):
        llm.fault(503, retry_after="0.6")
    send(page, "are you there?")

    error = page.locator("#messages > .msg.error")
    expect(error).to_have_count(1)
    expect(error.locator(".msg-body")).to_have_text(FAILED)
    expect(error.locator(".msg-retry")).to_be_visible()
    expect(page.locator("#send[data-state=send]")).to_be_visible()
    # Not an answer: no reply bubble, no token line, nothing to copy or regenerate.
    expect(page.locator(".msg.assistant")).to_have_count(0)
    expect(page.locator(".msg-usage")).to_have_count(0)
    # Each retry is a note of its own, its short wait to a tenth of a second.
    notes = page.locator(".thinking-block .thinking-entry")
    expect(notes).to_have_text(
        [
            "The model server failed (HTTP 503): retry 1 in 0.6 s.",
            "The model server failed (HTTP 503): retry 2 in 0.6 s.",
        ]
    )
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "failed-turn.png"))

    # A reload shows the same error, still offering Retry.
    page.reload()
    expect(page.locator(".msg.user")).to_have_text(["are you there?"])
    expect(error).to_have_count(1)
    expect(error.locator(".msg-body")).to_have_text(FAILED)
    expect(error.locator(".msg-retry")).to_be_visible()
    expect(page.locator(".msg.assistant")).to_have_count(0)
    expect(page.locator(".msg-usage")).to_have_count(0)

    llm.reply("Here I am.")
    error.locator(".msg-retry").click()
    answer = page.locator(".msg.assistant")
    expect(answer.locator(".msg-body")).to_have_text(["Here I am."])
    expect(error).to_have_count(0)
    expect(page.locator(".msg.user")).to_have_text(["are you there?"])
    expect(answer.locator(".msg-usage")).to_contain_text("tokens")
    # The model was asked the same question again, without the failed turn.
    asked = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "user"]
    assert asked[-1].endswith("are you there?") and len(asked) == 1

    page.reload()
    expect(answer.locator(".msg-body")).to_have_text(["Here I am."])
    expect(error).to_have_count(0)

    # An error that a later message follows offers no Retry: it would answer that one.
    for _ in range(3):
        llm.fault(503, retry_after="0.1")
    send(page, "again?")
    expect(error).to_have_count(1)
    llm.reply("Yes.")
    send(page, "hello?")
    expect(answer.last.locator(".msg-body")).to_have_text("Yes.")
    expect(error.locator(".msg-retry")).to_be_hidden()


def test_a_stopped_reply_keeps_its_mark_and_nothing_else(
    page: Any,  # noqa: F811
    live_site: str,
    llm: ScriptedLLM,
) -> None:
    from playwright.sync_api import expect

    # The stop's answer to the page, kept to wait for: then nothing more is coming.
    answers: list[str] = []
    page.on(
        "websocket",
        lambda socket: socket.on(
            "framereceived",
            lambda frame: answers.append(frame) if '"type": "stopped"' in str(frame) else None,
        ),
    )
    log_in(page, live_site)
    llm.reply(STORY, chunks=20, chunk_delay=0.3)
    send(page, "tell me a story")
    reply = page.locator(".msg.assistant")
    expect(reply).to_contain_text("Once")
    page.click("#send[data-state=stop]")
    expect(page.locator("#send[data-state=send]")).to_be_visible()
    for _ in range(100):
        if answers:
            break
        page.wait_for_timeout(100)
    assert answers and "Stopped 1 task." in answers[0]

    expect(reply).to_have_count(1)
    expect(reply.locator(".msg-stopped")).to_have_text("stopped")
    expect(reply).to_have_attribute("data-stopped", "true")
    expect(page.locator(".msg.error")).to_have_count(0)
    expect(page.locator("#messages > .msg")).to_have_count(2)
    expect(page.locator(".msg", has_text="Stopped 1 task")).to_have_count(0)
    expect(page.locator(".msg-usage")).to_have_count(0)

    page.reload()
    expect(reply).to_have_count(1)
    expect(reply.locator(".msg-stopped")).to_have_text("stopped")
    expect(page.locator(".msg", has_text="Stopped 1 task")).to_have_count(0)
    expect(page.locator(".msg.error")).to_have_count(0)
