"""`/stop` keeps what was said: the text streamed so far is saved as the assistant's reply,
marked stopped, shown so after a reload, and part of the model's next call."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agent.events import Collector
from agent.turn import SessionRef, run_turn
from sessions_app.models import Message, Run
from tests.llm_server import ScriptedLLM
from tests.ws import open_chat, receive_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]

LONG = "Once upon a time there was a very long answer that nobody waited for."


def chunks_of(events: Collector) -> list[str]:
    return [event.to_dict()["content"] for event in events.of_type("stream_chunk")]


async def until(condition, timeout: float = 10) -> None:  # type: ignore[no-untyped-def]
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.02)


async def test_the_text_so_far_is_saved_stopped_and_the_next_call_sees_it(
    llm: ScriptedLLM, ada: User
) -> None:
    llm.reply(LONG, chunks=14, chunk_delay=0.15)
    events = Collector()
    ref = SessionRef("web:st1", ada)
    turn = asyncio.create_task(run_turn(ref, "tell me a story", channel="web", emit=events))
    await until(lambda: len(chunks_of(events)) >= 3)

    stopped = await run_turn(ref, "/stop", channel="web")
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(turn, 10)

    assert stopped.text == "Stopped 1 task."
    said = "".join(chunks_of(events))
    assert said and LONG.startswith(said) and said != LONG
    [end] = events.of_type("stream_end")
    assert end.to_dict().get("stopped") is True and "discarded" not in end.to_dict()
    saved = await sync_to_async(list)(Message.objects.filter(session__key="web:st1"))
    assert [(m.role, m.content, m.stopped) for m in saved] == [
        ("user", "tell me a story", False),
        ("assistant", said, True),
    ]
    run = await sync_to_async(Run.objects.get)(session__key="web:st1")
    assert run.status == Run.Status.CANCELLED

    llm.reply("Sorry, I'll be brief.")
    assert (await run_turn(ref, "shorter please", channel="web")).success
    sent = llm.requests[-1]["messages"]
    assert [(m["role"], m["content"]) for m in sent[1:3]] == [
        ("user", "tell me a story"),
        ("assistant", said),
    ]


async def test_nothing_said_yet_saves_nothing(llm: ScriptedLLM, ada: User) -> None:
    llm.hang(30)
    ref = SessionRef("web:st2", ada)
    turn = asyncio.create_task(run_turn(ref, "think", channel="web"))
    await until(lambda: bool(llm.requests))
    await run_turn(ref, "/stop", channel="web")
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(turn, 10)
    roles = await sync_to_async(list)(
        Message.objects.filter(session__key="web:st2").values_list("role", flat=True)
    )
    assert roles == ["user"]


async def test_the_page_keeps_the_stopped_reply_and_so_does_the_api(
    llm: ScriptedLLM, ada: User, token: str
) -> None:
    llm.reply(LONG, chunks=14, chunk_delay=0.15)
    socket, _ = await open_chat("st3", token)
    await socket.send_json_to({"type": "message", "content": "tell me a story"})
    frames = await receive_until(socket, "stream_chunk")
    frames += [await socket.receive_json_from(timeout=5) for _ in range(2)]
    await socket.send_json_to({"type": "stop"})
    frames += await receive_until(socket, "thinking_finished")
    await socket.disconnect()

    said = "".join(f["content"] for f in frames if f["type"] == "stream_chunk")
    [end] = [f for f in frames if f["type"] == "stream_end"]
    assert end["stopped"] is True and said

    again, history = await open_chat("st3", token)
    await again.disconnect()
    [reply] = [m for m in history["messages"] if m["role"] == "assistant"]
    assert reply["content"] == said and reply["stopped"] is True
    [asked] = [m for m in history["messages"] if m["role"] == "user"]
    assert asked["stopped"] is False

    api = APIClient()
    api.force_authenticate(ada)
    answer = await sync_to_async(api.get)("/api/sessions/web:st3/messages")
    assert answer.status_code == 200
    stored = [(m["role"], m["content"], m["stopped"]) for m in answer.json()]
    assert stored == [("user", "tell me a story", False), ("assistant", said, True)]
