"""Tool cards keep how long each call took after the chat is opened again: in the `history`
frame of a real socket to daphne, and on the page in a real headless Chromium."""

from __future__ import annotations

from typing import Any

import pytest

from tests.llm_server import ScriptedLLM
from tests.test_browser import log_in, needs_chromium, page  # noqa: F401  (the `page` fixture)
from tests.test_history_frames import chat, reloaded, site, turn  # noqa: F401  (`site`)

pytestmark = pytest.mark.django_db(transaction=True)

DURATIONS = """() => Array.from(document.querySelectorAll(".tool-card"),
  (card) => [card.dataset.toolName, card.querySelector(".tool-duration").textContent])"""


async def test_the_history_frame_carries_each_tool_calls_duration(
    site: tuple[str, str],  # noqa: F811
    llm: ScriptedLLM,
) -> None:
    llm.tool_call("exec", {"command": "sleep 0.3"})
    llm.tool_calls([("list_dir", {"path": "."}), ("glob", {"pattern": "*"})])
    llm.reply("Done.")

    async with chat(site, "timed") as (socket, _):
        frames = await turn(socket, "take your time")
    live = {f["id"]: f["duration_ms"] for f in frames if f["type"] == "tool_result"}
    assert len(live) == 3

    history = await reloaded(site, "timed")
    stored = {m["tool_call_id"]: m.get("duration_ms") for m in history if m["role"] == "tool"}
    assert stored == live
    assert all(isinstance(ms, int) for ms in stored.values())
    assert max(stored.values()) >= 300


@needs_chromium
def test_tool_cards_show_their_durations_after_a_reload(
    page: Any,  # noqa: F811
    live_site: str,
    llm: ScriptedLLM,
) -> None:
    from playwright.sync_api import expect

    log_in(page, live_site)
    llm.tool_call("exec", {"command": "sleep 1.2"})
    llm.tool_call("list_dir", {"path": "."})
    llm.reply("Both done.")
    page.fill("#composer", "two tools please")
    page.press("#composer", "Enter")
    expect(page.locator(".msg.assistant .msg-body").last).to_have_text("Both done.")
    expect(page.locator(".tool-card[data-status=done]")).to_have_count(2)
    live = page.evaluate(DURATIONS)
    assert [name for name, _ in live] == ["exec", "list_dir"]
    assert live[0][1].endswith(" s") and live[1][1].endswith(" ms"), live

    page.reload()
    expect(page.locator(".tool-card[data-status=done]")).to_have_count(2)
    assert page.evaluate(DURATIONS) == live
