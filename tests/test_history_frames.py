"""What a chat gets back when it opens again, read from the `history` frame of a real
WebSocket to a real daphne: each model call's reasoning, and a message the `message` tool
sent to the chat, once and where it was shown live; nor is its text streamed a second time."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from tests.conftest import login_token
from tests.llm_server import ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def site(live_site: str, site_env: dict[str, str]) -> tuple[str, str]:
    """The live site's base URL and a token of its login."""
    token = login_token(site_env)
    return live_site, token


@asynccontextmanager
async def chat(site: tuple[str, str], chat_id: str) -> AsyncIterator[tuple[Any, dict[str, Any]]]:
    """An open socket on the chat, as its page opens it, and the history frame it got."""
    import websockets

    base, token = site
    url = base.replace("http", "ws") + f"/ws/chat/{chat_id}/?token={token}"
    async with websockets.connect(url, origin=base) as socket:
        history = json.loads(await socket.recv())
        assert history["type"] == "history"
        yield socket, history


async def turn(socket: Any, text: str) -> list[dict[str, Any]]:
    """Send `text`; every frame of its turn."""
    await socket.send(json.dumps({"type": "message", "content": text}))
    return await frames_of_a_turn(socket)


async def frames_of_a_turn(socket: Any) -> list[dict[str, Any]]:
    """The frames up to the end of a turn, and the reply that follows it, if any."""
    frames: list[dict[str, Any]] = []
    async with asyncio.timeout(30):
        while not frames or frames[-1]["type"] != "thinking_finished":
            frames.append(json.loads(await socket.recv()))
    try:
        async with asyncio.timeout(1.5):
            while True:
                frames.append(json.loads(await socket.recv()))
    except TimeoutError:
        return frames


async def reloaded(site: tuple[str, str], chat_id: str) -> list[dict[str, Any]]:
    async with chat(site, chat_id) as (_, history):
        assert history["running"] is False
        return list(history["messages"])


def said(messages: list[dict[str, Any]]) -> list[str]:
    """The agent's words among `messages`, in order."""
    return [m["content"] for m in messages if m["role"] == "assistant" and m["content"]]


async def test_the_history_frame_carries_the_reasoning_of_each_call(
    site: tuple[str, str], llm: ScriptedLLM
) -> None:
    llm.tool_call("read_file", {"path": "notes.txt"}, reasoning="First I look for the notes.")
    llm.reply("There are no notes yet.", reasoning="The file is missing; I say so.")

    async with chat(site, "think1") as (socket, _):
        frames = await turn(socket, "what do my notes say?")
    live = "".join(f["content"] for f in frames if f["type"] == "thinking")
    assert live == "First I look for the notes.The file is missing; I say so."

    messages = await reloaded(site, "think1")
    calls = [m for m in messages if m["role"] == "assistant"]
    assert [(bool(m["tool_calls"]), m["reasoning_content"]) for m in calls] == [
        (True, "First I look for the notes."),
        (False, "The file is missing; I say so."),
    ]
    assert [m.get("reasoning_content") for m in messages if m["role"] != "assistant"] == [
        None,
        None,
    ]
    # The session's messages on the API say the same.
    base, token = site
    async with httpx.AsyncClient(base_url=base) as api:
        listed = await api.get(
            "/api/sessions/web:think1/messages", headers={"Authorization": f"Token {token}"}
        )
    assert [m["reasoning_content"] for m in listed.json() if m["role"] == "assistant"] == [
        "First I look for the notes.",
        "The file is missing; I say so.",
    ]


async def test_a_message_to_its_own_chat_is_in_the_history_where_it_was_shown(
    site: tuple[str, str], llm: ScriptedLLM
) -> None:
    llm.tool_call("message", {"content": "Half of the files are done."})
    llm.reply("All done.")

    async with chat(site, "msg1") as (socket, _):
        frames = await turn(socket, "convert them")
    shown = [f["content"] for f in frames if f["type"] == "message" and f["role"] == "assistant"]
    assert shown == ["Half of the files are done.", "All done."]

    messages = await reloaded(site, "msg1")
    assert said(messages) == ["Half of the files are done.", "All done."]
    # Where the page showed it live: after the card of the call that sent it.
    roles = [(m["role"], m["name"] or m["content"]) for m in messages]
    assert roles[1:] == [
        ("assistant", None),
        ("tool", "message"),
        ("assistant", "Half of the files are done."),
        ("assistant", "All done."),
    ]
    assert messages[1]["tool_calls"][0]["function"]["name"] == "message"


async def test_a_reply_that_repeats_the_message_is_shown_once_live_and_after_a_reload(
    site: tuple[str, str], llm: ScriptedLLM
) -> None:
    llm.tool_call("message", {"content": "The answer is 42."})
    llm.reply("The answer is 42.\n", chunks=6, reasoning="I said it already.")

    async with chat(site, "msg2") as (socket, _), chat(site, "msg2") as (other, _):
        frames = await turn(socket, "what is the answer?")
        elsewhere = await frames_of_a_turn(other)

    for seen in (frames, elsewhere):
        shown = [f["content"] for f in seen if f["type"] == "message" and f["role"] != "user"]
        assert shown == ["The answer is 42."]
        assert not [f for f in seen if f["type"].startswith("stream_")]
    # Its reasoning was shown all the same.
    assert "I said it already." in "".join(f["content"] for f in frames if f["type"] == "thinking")

    messages = await reloaded(site, "msg2")
    assert said(messages) == ["The answer is 42."]
    [last] = [m for m in messages if m["reasoning_content"]]
    assert last == {**last, "role": "assistant", "content": None, "tool_calls": None}
    assert last["reasoning_content"] == "I said it already."


async def test_a_reply_that_only_starts_like_the_message_streams_whole(
    site: tuple[str, str], llm: ScriptedLLM
) -> None:
    llm.tool_call("message", {"content": "The answer is 42."})
    llm.reply("The answer is 42, and here is why: six times seven.", chunks=10)

    async with chat(site, "msg3") as (socket, _):
        frames = await turn(socket, "what is the answer, and why?")

    streamed = "".join(f["content"] for f in frames if f["type"] == "stream_chunk")
    assert streamed == "The answer is 42, and here is why: six times seven."
    assert next(f["type"] for f in frames if f["type"].startswith("stream_")) == "stream_start"
    messages = await reloaded(site, "msg3")
    assert said(messages) == [
        "The answer is 42.",
        "The answer is 42, and here is why: six times seven.",
    ]


async def test_a_message_to_another_chat_is_in_that_chats_history_only(
    site: tuple[str, str], llm: ScriptedLLM
) -> None:
    async with chat(site, "news1"):
        pass  # opened once: the message tool delivers only to a chat that exists
    llm.tool_call("message", {"content": "The build is green.", "channel": "web",
                              "chat_id": "news1"})  # fmt: skip
    llm.reply("Told the news chat.")

    async with chat(site, "msg4") as (socket, _):
        await turn(socket, "tell the news chat")

    messages = await reloaded(site, "msg4")
    assert said(messages) == ["Told the news chat."]
    assert [m["content"] for m in messages if m["role"] == "tool"] == ["Message sent to web:news1."]
    assert said(await reloaded(site, "news1")) == ["The build is green."]
