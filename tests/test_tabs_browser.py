"""Two tabs of one chat in a real headless Chromium: the one that did not send the message
streams the reply chunk by chunk, as the one that did, and its chunks join to the saved text."""

from __future__ import annotations

import json
from typing import Any

from tests.llm_server import ScriptedLLM
from tests.test_browser import log_in, page  # noqa: F401  (the `page` fixture)
from tests.test_browser import pytestmark as browser_marks

pytestmark = browser_marks

STORY = " ".join(f"word{n}" for n in range(80)) + "."


def stream_chunks(tab: Any) -> list[str]:
    """The text of every `stream_chunk` frame `tab`'s chat socket receives, as they come."""
    chunks: list[str] = []

    def watch(socket: Any) -> None:
        def received(payload: Any) -> None:
            frame = json.loads(payload)
            if frame.get("type") == "stream_chunk":
                chunks.append(frame["content"])

        socket.on("framereceived", received)

    tab.on("websocket", watch)
    return chunks


def test_a_second_tab_streams_the_reply_chunk_by_chunk(
    page: Any,  # noqa: F811
    live_site: str,
    llm: ScriptedLLM,
) -> None:
    from playwright.sync_api import expect

    log_in(page, live_site)
    other = page.context.new_page()
    other.set_default_timeout(20_000)
    chunks = stream_chunks(other)
    other.goto(page.url)
    expect(other.locator("#composer")).to_be_enabled()

    llm.reply(STORY, chunks=40, chunk_delay=0.05)
    page.fill("#composer", "tell me a story")
    page.press("#composer", "Enter")

    # The other tab shows the reply growing, before it is whole.
    reply = other.locator(".msg.assistant .msg-body").last
    expect(reply).to_contain_text("word10")
    assert "word79" not in reply.inner_text()
    expect(reply).to_have_text(STORY)
    expect(page.locator(".msg.assistant .msg-body").last).to_have_text(STORY)

    assert len(chunks) >= 10, chunks
    assert "".join(chunks) == STORY
    # What was saved is what both tabs show after a reload.
    other.reload()
    expect(other.locator(".msg.assistant .msg-body").last).to_have_text(STORY)
    expect(other.locator(".msg.user").last).to_have_text("tell me a story")
