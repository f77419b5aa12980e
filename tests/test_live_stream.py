"""A socket that opens while a turn streams, a second tab or the first one reconnecting,
gets the text so far, then the rest: the chunks it sees join to the saved reply."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from sessions_app.models import Message
from tests.llm_server import ScriptedLLM
from tests.ws import open_chat, receive_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]

STORY = " ".join(f"word{n}" for n in range(60)) + "."


def said(frames: list[dict[str, Any]], msg_id: str | None = None) -> str:
    return "".join(
        f["content"]
        for f in frames
        if f["type"] == "stream_chunk" and (msg_id is None or f["msg_id"] == msg_id)
    )


async def chunks_seen(socket: WebsocketCommunicator, count: int) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = []
    while sum(f["type"] == "stream_chunk" for f in frames) < count:
        frames.append(await socket.receive_json_from(timeout=10))
    return frames


async def saved_reply(chat_id: str) -> str:
    replies = await sync_to_async(list)(
        Message.objects.filter(session__key=f"web:{chat_id}", role="assistant").order_by("id")
    )
    return replies[-1].content


async def test_a_second_tab_gets_the_text_so_far_then_the_rest(
    llm: ScriptedLLM, token: str
) -> None:
    llm.reply(STORY, chunks=30, chunk_delay=0.08)
    first, _ = await open_chat("live1", token)
    await first.send_json_to({"type": "message", "content": "tell me a story"})
    before = await chunks_seen(first, 5)

    second, history = await open_chat("live1", token)
    assert history["running"] is True
    assert [m["content"] for m in history["messages"]] == ["tell me a story"]
    # Other tabs' frames of the turn may come first: the group's are on their way meanwhile.
    frames = await receive_until(second, "thinking_finished")
    start, snapshot, *rest = [f for f in frames if f["type"].startswith("stream_")]
    [started] = [f for f in before if f["type"] == "stream_start"]
    assert start == {"type": "stream_start", "msg_id": started["msg_id"]}
    assert snapshot["type"] == "stream_chunk" and snapshot["msg_id"] == started["msg_id"]
    # The text so far, in one chunk, at least what the first tab had been sent.
    assert snapshot["content"].startswith(said(before)) and snapshot["content"] != STORY
    await receive_until(first, "thinking_finished")
    await first.disconnect()
    await second.disconnect()

    assert said([snapshot, *rest], started["msg_id"]) == STORY == await saved_reply("live1")
    ends = [f for f in rest if f["type"] == "stream_end"]
    assert ends == [{"type": "stream_end", "msg_id": started["msg_id"]}]


async def test_a_tab_that_reconnects_mid_reply_misses_nothing(llm: ScriptedLLM, token: str) -> None:
    # Many small chunks close together, as a fast model sends them.
    llm.reply(STORY, chunks=120, chunk_delay=0.01)
    tab, _ = await open_chat("live2", token)
    await tab.send_json_to({"type": "message", "content": "go"})
    await chunks_seen(tab, 3)
    await tab.disconnect()

    again, history = await open_chat("live2", token)
    rest = await receive_until(again, "thinking_finished")
    await again.disconnect()

    assert history["running"] is True
    streamed = [f for f in rest if f["type"].startswith("stream_")]
    assert [f["type"] for f in streamed[:2]] == ["stream_start", "stream_chunk"]
    assert said(rest) == STORY == await saved_reply("live2")


async def test_a_tab_that_opens_during_a_tool_call_gets_the_reply_that_follows(
    llm: ScriptedLLM, token: str
) -> None:
    llm.tool_call("exec", {"command": "sleep 1.5; echo done"})
    llm.reply(STORY, chunks=10, chunk_delay=0.05)
    first, _ = await open_chat("live3", token)
    await first.send_json_to({"type": "message", "content": "run it"})
    await receive_until(first, "tool_call")

    second, history = await open_chat("live3", token)
    rest = await receive_until(second, "thinking_finished")
    await receive_until(first, "thinking_finished")
    await first.disconnect()
    await second.disconnect()

    assert history["running"] is True
    kinds = [f["type"] for f in rest]
    assert kinds.index("tool_result") < kinds.index("stream_start")
    assert said(rest) == STORY == await saved_reply("live3")


async def test_a_tab_opened_after_the_turn_sees_no_stream(llm: ScriptedLLM, token: str) -> None:
    llm.reply(STORY, chunks=5)
    tab, _ = await open_chat("live4", token)
    await tab.send_json_to({"type": "message", "content": "hi"})
    await receive_until(tab, "thinking_finished")
    await tab.disconnect()

    again, history = await open_chat("live4", token)
    assert history["running"] is False
    late = []
    while not await again.receive_nothing(timeout=1.5):
        late.append(await again.receive_json_from())
    await again.disconnect()
    assert not [f for f in late if f["type"].startswith("stream_")]


async def test_a_joined_tab_gets_the_thinking_notes_and_is_let_go_when_it_closes(
    llm: ScriptedLLM, token: str
) -> None:
    from agent.turn import live

    llm.tool_call("exec", {"command": "sleep 1.5; echo done"})
    llm.reply(STORY, chunks=10, chunk_delay=0.1, reasoning="weighing the words")
    first, _ = await open_chat("live5", token)
    await first.send_json_to({"type": "message", "content": "think, then answer"})
    [started] = [f for f in await receive_until(first, "tool_call") if f.get("run_id")][:1]

    second, _ = await open_chat("live5", token)
    frames = await receive_until(second, "stream_chunk")
    turn = live._turns[UUID(started["run_id"])]
    assert len(turn.here) == 1  # joined in this event loop, no layer between
    await second.disconnect()
    rest = await receive_until(first, "thinking_finished")
    await first.disconnect()

    assert "weighing the words" in "".join(f["content"] for f in frames if f["type"] == "thinking")
    assert said(rest) == STORY
    assert not turn.here  # it left, rather than be sent the rest


async def test_a_tab_already_open_streams_the_reply_chunk_by_chunk(
    llm: ScriptedLLM, token: str
) -> None:
    llm.reply(STORY, chunks=30, chunk_delay=0.05)
    first, _ = await open_chat("live6", token)
    second, _ = await open_chat("live6", token)
    await first.send_json_to({"type": "message", "content": "tell me a story"})
    seen = await receive_until(second, "message", role="assistant")
    await receive_until(first, "thinking_finished")
    await first.disconnect()
    await second.disconnect()

    chunks = [f for f in seen if f["type"] == "stream_chunk"]
    # Chunk by chunk as the model writes, not the whole reply at its end.
    assert len(chunks) >= 10
    assert next(f["type"] for f in seen if f["type"].startswith("stream_")) == "stream_start"
    assert said(seen) == STORY == await saved_reply("live6")
    # The stream ends before the reply it streamed is shown whole.
    assert seen[-1]["type"] == "message"
    assert [f["type"] for f in seen].count("stream_end") == 1


async def test_a_tab_already_open_streams_each_turn_of_the_chat(
    llm: ScriptedLLM, token: str
) -> None:
    llm.reply("first answer, told slowly", chunks=8, chunk_delay=0.2)
    llm.reply("second answer, told slowly", chunks=8, chunk_delay=0.2)
    first, _ = await open_chat("live7", token)
    second, _ = await open_chat("live7", token)
    for prompt in ("one", "two"):
        await first.send_json_to({"type": "message", "content": prompt})
        seen = await receive_until(second, "message", role="assistant")
        await receive_until(first, "thinking_finished")
        assert said(seen).endswith("answer, told slowly")
        assert said(seen) == await saved_reply("live7")
    await first.disconnect()
    await second.disconnect()


async def test_a_tab_of_another_process_joins_through_the_layer(
    llm: ScriptedLLM, token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As a tab served by another daphne process sees the turn: it asks through the layer.
    from agent.doors import watching

    monkeypatch.setattr(watching, "join_stream_here", lambda *args: False)
    llm.reply(STORY, chunks=30, chunk_delay=0.05)
    first, _ = await open_chat("live8", token)
    second, _ = await open_chat("live8", token)
    await first.send_json_to({"type": "message", "content": "tell me a story"})
    seen = await receive_until(second, "message", role="assistant")
    await receive_until(first, "thinking_finished")
    await first.disconnect()
    await second.disconnect()

    assert len([f for f in seen if f["type"] == "stream_chunk"]) >= 5
    assert said(seen) == STORY == await saved_reply("live8")
