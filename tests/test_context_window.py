"""Long conversations and big tool results against a model that refuses anything over the
window it advertises: turns keep working, and what is sent is always whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from agent.llm.client import _limits
from agent.turn import run_turn
from sessions_app.models import Message
from tests.conftest import folder_of
from tests.llm_server import ScriptedLLM

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]


@pytest.fixture(autouse=True)
def small_model(llm: ScriptedLLM, settings: Any) -> ScriptedLLM:
    llm.context_window = 8_000
    settings.AGENT_MAX_TOKENS = 500
    _limits.clear()  # discovered afresh from this server
    return llm


def assert_whole(messages: list[dict[str, Any]]) -> None:
    open_calls: set[str] = set()
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in open_calls
            open_calls.discard(message["tool_call_id"])
        else:
            assert not open_calls
            open_calls = {call["id"] for call in message.get("tool_calls") or ()}
    assert not open_calls


async def test_a_long_conversation_keeps_fitting_the_window(llm: ScriptedLLM) -> None:
    for n in range(40):  # about 40,000 tokens of talk through an 8,000-token window
        result = await run_turn("cli:long", f"note {n}: " + "words " * 400, channel="cli")
        assert result.success, result.text

    assert llm.refused == 0
    last = llm.requests[-1]["messages"]
    assert last[-1]["content"].endswith("note 39: " + "words " * 399 + "words ")
    assert len(last) < 40  # the oldest turns were left out...
    assert last[1]["role"] == "user"  # ...whole, starting at a user message
    assert await sync_to_async(Message.objects.filter(session__key="cli:long").count)() == 80


async def test_a_turn_whose_own_results_outgrow_the_window_keeps_working(
    llm: ScriptedLLM, workspace: Path
) -> None:
    for name in "abcd":
        (folder_of(workspace) / f"{name}.txt").write_text(
            "".join(f"{name} line {n}\n" for n in range(1_500))
        )
    for name in "abcd":
        llm.tool_call("read_file", {"path": f"{name}.txt"})
    llm.reply("Read them all.")

    result = await run_turn("cli:big", "read every file", channel="cli")

    assert result.success and result.text == "Read them all."
    assert llm.refused == 0
    for request in llm.requests:
        assert_whole(request["messages"][1:])
    last = llm.requests[-1]["messages"]
    assert last[1]["content"].endswith("read every file")  # the user's message stays
    assert "cut to fit the context window" in str(last)
    # Stored whole, whatever was sent.
    stored = await sync_to_async(
        lambda: list(Message.objects.filter(session__key="cli:big", role="tool"))
    )()
    assert len(stored) == 4 and all(len(m.content) > 6_000 for m in stored)


async def test_a_window_set_too_large_is_survived_by_sending_half(
    llm: ScriptedLLM, settings: Any
) -> None:
    for n in range(6):
        llm.reply(f"answer {n}")
        assert (await run_turn("cli:over", f"{n} " + "talk " * 1_200, channel="cli")).success
    settings.AGENT_CONTEXT_WINDOW = 100_000  # wrong: the server takes 8,000
    llm.reply("still here")

    result = await run_turn("cli:over", "and now?", channel="cli")

    assert result.success and result.text == "still here"
    assert llm.refused == 1


async def test_a_message_that_can_never_fit_gets_a_plain_answer(llm: ScriptedLLM) -> None:
    result = await run_turn("cli:huge", "x " * 40_000, channel="cli")

    assert not result.success and result.error_kind == "context_overflow"
    # The message alone overflowed: a shorter one helps, a fresh conversation would not.
    assert result.text.startswith("Your message is too long for the model's context window")
    assert "shorter message" in result.text and "/new" not in result.text
    assert ".." not in result.text
    assert llm.refused == 2  # tried once more with less, then gave up


async def test_the_servers_output_limit_caps_what_is_asked_and_kept_free(
    llm: ScriptedLLM, settings: Any
) -> None:
    settings.AGENT_MAX_TOKENS = 4_096
    llm.output_limit = 300
    llm.reply("short")

    assert (await run_turn("cli:out", "hi", channel="cli")).success

    assert llm.requests[-1]["max_tokens"] == 300
