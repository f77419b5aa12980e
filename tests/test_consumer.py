"""The chat WebSocket through the real ASGI application, with the scripted model."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.test import Client

from sessions_app.models import Message, Run
from tests.conftest import folder_of
from tests.llm_server import ScriptedLLM
from tests.ws import HOST, ORIGIN, communicator, open_chat, receive_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]


@sync_to_async
def saved(key: str) -> list[Message]:
    return list(Message.objects.filter(session__key=key).order_by("id"))


@sync_to_async
def runs(key: str) -> list[Run]:
    return list(Run.objects.filter(session__key=key))


async def test_session_cookie_authenticates(llm: ScriptedLLM) -> None:
    await sync_to_async(User.objects.create_user)("cookie", password="pw-cookie-1")
    client = Client()
    assert await sync_to_async(client.login)(username="cookie", password="pw-cookie-1")
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    socket = communicator("/ws/chat/c1/", headers=[HOST, ORIGIN, (b"cookie", cookie)])
    connected, _ = await socket.connect()
    assert connected
    assert (await socket.receive_json_from())["type"] == "history"
    await socket.disconnect()


async def test_history_on_connect(llm: ScriptedLLM, token: str) -> None:
    socket, history = await open_chat("h1", token)
    assert history["messages"] == [] and history["running"] is False
    assert history["model"] == "openai/scripted"
    llm.reply("Hello, Ada.")
    await socket.send_json_to({"type": "message", "content": "hi there"})
    await receive_until(socket, "message", role="assistant")
    await socket.disconnect()

    socket, history = await open_chat("h1", token)
    assert [(m["role"], m["content"]) for m in history["messages"]] == [
        ("user", "hi there"),
        ("assistant", "Hello, Ada."),
    ]
    await socket.disconnect()


async def test_streamed_turn_with_tools_frame_by_frame(
    llm: ScriptedLLM, token: str, workspace: Path
) -> None:
    llm.tool_call("write_file", {"path": "a.txt", "content": "A"}, text="Let me write it.")
    llm.reply("Written **a.txt**, all done.", chunks=6)
    socket, _ = await open_chat("t1", token)

    await socket.send_json_to({"type": "message", "content": "write a.txt"})
    frames = await receive_until(socket, "message", role="assistant")
    await socket.disconnect()

    types = [f["type"] for f in frames]
    collapsed = [t for i, t in enumerate(types) if i == 0 or t != types[i - 1]]
    assert collapsed == [
        "thinking_started",
        "message",
        "stream_start",
        "stream_chunk",
        "stream_end",
        "tool_call",
        "tool_result",
        "stream_start",
        "stream_chunk",
        "stream_end",
        "thinking_finished",
        "message",
    ]
    run_id = frames[0]["run_id"]
    assert frames[1] == {
        "type": "message",
        "role": "user",
        "content": "write a.txt",
        "run_id": run_id,
        "author": {"id": frames[1]["author"]["id"], "name": "ada"},
    }
    # Both carry what the run used; the scripted model has no price, so its cost is unknown.
    used = frames[-2].pop("usage")
    assert frames[-2] == {"type": "thinking_finished", "run_id": run_id}
    assert used["total_tokens"] > 0 and used["cost"] is None and used["unpriced_runs"] == 1
    # The reply names the model that wrote it, and when.
    assert frames[0]["model"] == "openai/scripted"
    assert datetime.fromisoformat(frames[-1].pop("created")).tzinfo is not None
    assert frames[-1] == {
        "type": "message",
        "role": "assistant",
        "content": "Written **a.txt**, all done.",
        "run_id": run_id,
        "usage": used,
        "model": "openai/scripted",
    }
    call = next(f for f in frames if f["type"] == "tool_call")
    assert call["name"] == "write_file" and call["arguments"] == {"path": "a.txt", "content": "A"}
    result = next(f for f in frames if f["type"] == "tool_result")
    assert result["id"] == call["id"] and result["result"].startswith("Wrote")
    assert (folder_of(workspace, "ada") / "a.txt").read_text() == "A"

    messages = await saved("web:t1")
    assistant_texts = [m.content for m in messages if m.role == "assistant"]
    streams: dict[str, str] = {}
    for frame in frames:
        if frame["type"] == "stream_chunk":
            streams[frame["msg_id"]] = streams.get(frame["msg_id"], "") + frame["content"]
    assert list(streams.values()) == assistant_texts


async def test_stop_mid_turn(llm: ScriptedLLM, token: str) -> None:
    llm.tool_call("exec", {"command": "sleep 30"})
    llm.tool_call("write_file", {"path": "never.txt", "content": "x"})
    socket, _ = await open_chat("s1", token)
    await socket.send_json_to({"type": "message", "content": "do a slow thing"})
    await receive_until(socket, "tool_call")

    await socket.send_json_to({"type": "stop"})
    # The stop's answer (to this socket, not a reply) and the stopped turn's end arrive in
    # either order.
    frames: list[dict] = []
    while not (
        any(f == {"type": "stopped", "message": "Stopped 1 task."} for f in frames)
        and any(f["type"] == "thinking_finished" for f in frames)
    ):
        frames.append(await socket.receive_json_from(timeout=10))
    assert not any(f["type"] == "message" and f["role"] == "assistant" for f in frames)
    assert next(f for f in frames if f["type"] == "tool_result")["result"].startswith(
        "Error: the turn was stopped"
    )
    types = [f["type"] for f in frames]
    assert "thinking_finished" in types
    assert "tool_call" not in types
    await socket.disconnect()

    assert len(llm.requests) == 1  # the model was not called again after the stop
    (run,) = await runs("web:s1")
    assert run.status == "cancelled"
    messages = await saved("web:s1")
    assert [m.role for m in messages] == ["user", "assistant", "tool"]
    assert messages[2].tool_call_id == messages[1].tool_calls[0]["id"]


async def test_turn_outlives_a_closed_tab(llm: ScriptedLLM, token: str) -> None:
    llm.reply("a slow answer that keeps streaming after the tab is gone", chunks=30)
    llm._steps[-1].chunk_delay = 0.03
    socket, _ = await open_chat("d1", token)
    await socket.send_json_to({"type": "message", "content": "talk slowly"})
    await receive_until(socket, "stream_chunk")
    await socket.disconnect()

    for _ in range(200):
        finished = [r for r in await runs("web:d1") if r.finished]
        if finished:
            break
        await asyncio.sleep(0.05)
    assert finished and finished[0].status == "succeeded"
    messages = await saved("web:d1")
    assert messages[-1].content == "a slow answer that keeps streaming after the tab is gone"

    socket, history = await open_chat("d1", token)
    assert history["messages"][-1]["content"] == messages[-1].content
    assert history["running"] is False
    await socket.disconnect()


async def test_two_sockets_on_one_session_both_get_the_reply(llm: ScriptedLLM, token: str) -> None:
    # Streamed slowly enough for the other socket to hear the turn start meanwhile (its
    # group's frames are held until its joining mark comes back, a while through Redis).
    llm.tool_call("list_dir", {}).reply("shared answer", chunks=8, chunk_delay=0.2)
    first, _ = await open_chat("m1", token)
    second, _ = await open_chat("m1", token)

    await first.send_json_to({"type": "message", "content": "hello both"})
    mine = await receive_until(first, "message", role="assistant")
    theirs = await receive_until(second, "message", role="assistant")

    assert mine[-1]["content"] == theirs[-1]["content"] == "shared answer"
    assert mine[-1]["run_id"] == theirs[-1]["run_id"]
    other_types = {f["type"] for f in theirs}
    assert {"thinking_started", "tool_call", "tool_result", "thinking_finished"} <= other_types
    # The other tab streams the reply too, as the asking one does.
    streamed = "".join(f["content"] for f in theirs if f["type"] == "stream_chunk")
    assert streamed == "shared answer"
    await first.disconnect()
    await second.disconnect()


async def test_slash_commands(llm: ScriptedLLM, token: str, settings) -> None:
    settings.AGENT_MODELS = ["openai/another"]
    socket, _ = await open_chat("c1", token)
    await socket.send_json_to({"type": "message", "content": "/help"})
    help_frame = (await receive_until(socket, "message", role="assistant"))[-1]
    assert "/new" in help_frame["content"] and "run_id" not in help_frame

    await socket.send_json_to({"type": "message", "content": "/model openai/another"})
    assert (
        "openai/another"
        in (await receive_until(socket, "message", role="assistant"))[-1]["content"]
    )

    llm.reply("answer")
    await socket.send_json_to({"type": "message", "content": "question"})
    await receive_until(socket, "message", role="assistant", content="answer")
    assert llm.requests[-1]["model"] == "another"

    await socket.send_json_to({"type": "message", "content": "/new"})
    assert (
        "2 messages archived"
        in (await receive_until(socket, "message", role="assistant"))[-1]["content"]
    )

    await socket.send_json_to({"type": "message", "content": "/stop"})
    assert (await receive_until(socket, "message", role="assistant"))[-1][
        "content"
    ] == "No running task to stop."
    await socket.disconnect()

    socket, history = await open_chat("c1", token)
    assert history["messages"] == [] and history["model"] == "openai/another"
    await socket.disconnect()


@pytest.mark.parametrize(
    "frame",
    [
        "not json at all",
        json.dumps(["a", "list"]),
        json.dumps({"type": "dance"}),
        json.dumps({"type": "message"}),
        json.dumps({"type": "message", "content": "   "}),
        json.dumps({"type": "message", "content": 42}),
        json.dumps({"type": "message", "content": "x" * 100_001}),
    ],
    ids=["not-json", "not-object", "unknown-type", "no-content", "blank", "not-text", "oversized"],
)
async def test_bad_frames_get_an_error_and_the_socket_stays_open(
    llm: ScriptedLLM, token: str, frame: str
) -> None:
    socket, _ = await open_chat("b1", token)
    await socket.send_to(text_data=frame)
    error = await socket.receive_json_from()
    assert error["type"] == "error" and error["message"]

    await socket.send_json_to({"type": "message", "content": "/help"})
    assert (await receive_until(socket, "message", role="assistant"))[-1]["content"].startswith(
        "Commands"
    )
    await socket.disconnect()
    assert await saved("web:b1") == []
    assert llm.requests == []
