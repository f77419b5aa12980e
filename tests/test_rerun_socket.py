"""Regenerating the last reply and editing a message of the user's, over the chat socket:
what came after is archived (kept, marked), every tab hears of it, the model is asked again
without it, and whatever cannot be done is refused with an error frame."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from sessions_app.models import Approval, Message
from tests.llm_server import ScriptedLLM
from tests.ws import open_chat, receive_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]


@sync_to_async
def stored(chat: str) -> list[tuple[str, str | None, bool]]:
    rows = Message.objects.filter(session__key=f"web:{chat}").order_by("id")
    return [(m.role, m.content, m.archived) for m in rows]


async def ask(socket: WebsocketCommunicator, text: str) -> None:
    await socket.send_json_to({"type": "message", "content": text})
    await receive_until(socket, "message", role="assistant")


async def two_turns(llm: ScriptedLLM, token: str, chat: str) -> WebsocketCommunicator:
    socket, _ = await open_chat(chat, token)
    llm.reply("Paris.")
    await ask(socket, "capital of France?")
    llm.reply("Rome, I think.")
    await ask(socket, "and of Spain?")
    return socket


def sent_to_model(request: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (m["role"], m["content"] if isinstance(m["content"], str) else "")
        for m in request["messages"]
        if m["role"] in ("user", "assistant")
    ]


async def history(chat: str, token: str) -> list[tuple[str, str]]:
    socket, frame = await open_chat(chat, token)
    await socket.disconnect()
    return [(m["role"], m["content"]) for m in frame["messages"]]


async def test_regenerate_archives_the_last_turn_and_asks_again(
    llm: ScriptedLLM, token: str
) -> None:
    socket = await two_turns(llm, token, "regen")
    other, _ = await open_chat("regen", token)  # a second tab of the same chat
    [last_user] = [m for m in await sync_to_async(list)(Message.objects.filter(role="user"))][1:]

    llm.reply("Madrid.")
    await socket.send_json_to({"type": "regenerate"})
    frames = await receive_until(socket, "message", role="assistant")
    archived = next(f for f in frames if f["type"] == "archived")
    assert archived == {
        "type": "archived",
        "id": last_user.pk,
        "count": 2,
        "run_id": str(last_user.run_id),
    }
    types = [f["type"] for f in frames]
    assert types.index("archived") < types.index("thinking_started")
    assert frames[-1]["content"] == "Madrid."
    # The user's words again, as the start of the new turn.
    assert {"role": "user", "content": "and of Spain?"}.items() <= next(
        f for f in frames if f["type"] == "message"
    ).items()
    # The other tab sees the same: the old turn leaves, the new one comes.
    seen = await receive_until(other, "message", role="assistant")
    assert [f["type"] for f in seen][:2] == ["archived", "thinking_started"]
    assert seen[0]["id"] == last_user.pk and seen[-1]["content"] == "Madrid."

    # The model was not shown the reply it is replacing.
    assert sent_to_model(llm.requests[-1]) == [
        ("user", "capital of France?"),
        ("assistant", "Paris."),
        ("user", llm.requests[-1]["messages"][-1]["content"]),
    ]
    assert "and of Spain?" in llm.requests[-1]["messages"][-1]["content"]
    assert await stored("regen") == [
        ("user", "capital of France?", False),
        ("assistant", "Paris.", False),
        ("user", "and of Spain?", True),
        ("assistant", "Rome, I think.", True),
        ("user", "and of Spain?", False),
        ("assistant", "Madrid.", False),
    ]
    assert await history("regen", token) == [
        ("user", "capital of France?"),
        ("assistant", "Paris."),
        ("user", "and of Spain?"),
        ("assistant", "Madrid."),
    ]
    await socket.disconnect()
    await other.disconnect()


@pytest.mark.parametrize("by", ["id", "run_id"])
async def test_edit_a_message_and_run_again_from_it(llm: ScriptedLLM, token: str, by: str) -> None:
    chat = f"edit-{by}"
    socket = await two_turns(llm, token, chat)
    first = await sync_to_async(Message.objects.filter(role="user").order_by("id").first)()
    handle = first.pk if by == "id" else str(first.run_id)

    llm.reply("Berlin.")
    await socket.send_json_to({"type": "edit", by: handle, "content": "capital of Germany?"})
    frames = await receive_until(socket, "message", role="assistant")
    assert next(f for f in frames if f["type"] == "archived")["count"] == 4
    assert frames[-1]["content"] == "Berlin."
    assert sent_to_model(llm.requests[-1])[:-1] == []  # nothing before it is left
    assert "capital of Germany?" in llm.requests[-1]["messages"][-1]["content"]
    assert await history(chat, token) == [
        ("user", "capital of Germany?"),
        ("assistant", "Berlin."),
    ]
    assert [archived for *_, archived in await stored(chat)] == [True] * 4 + [False] * 2
    await socket.disconnect()


async def refused(socket: WebsocketCommunicator, frame: dict[str, Any]) -> str:
    await socket.send_json_to(frame)
    answer = await socket.receive_json_from(timeout=10)
    assert answer["type"] == "error", answer
    return str(answer["message"])


async def test_what_cannot_be_edited_or_regenerated_is_refused(
    llm: ScriptedLLM, token: str, other_token: str
) -> None:
    empty, _ = await open_chat("nothing-yet", token)
    assert "no message of yours" in await refused(empty, {"type": "regenerate"})
    await empty.disconnect()

    socket = await two_turns(llm, token, "refusals")
    rows = await sync_to_async(list)(Message.objects.order_by("id"))
    reply = next(m for m in rows if m.role == "assistant")
    first = rows[0]
    assert "only a message you wrote" in await refused(
        socket, {"type": "edit", "id": reply.pk, "content": "x"}
    )
    assert "no such message" in await refused(socket, {"type": "edit", "id": 10**9, "content": "x"})
    # Another user's message is not in this chat.
    bobs, _ = await open_chat("bobs", other_token)
    llm.reply("Hi Bob.")
    await ask(bobs, "hello")
    await bobs.disconnect()
    bob_message = await sync_to_async(
        Message.objects.filter(session__owner__username="bob", role="user").get
    )()
    assert "no such message" in await refused(
        socket, {"type": "edit", "id": bob_message.pk, "content": "mine now"}
    )
    assert "empty" in await refused(socket, {"type": "edit", "id": first.pk, "content": "  "})
    assert "command" in await refused(socket, {"type": "edit", "id": first.pk, "content": "/new"})
    for bad in (
        {"type": "edit", "id": "7", "content": "x"},
        {"type": "edit", "id": True, "content": "x"},
        {"type": "edit", "id": -1, "content": "x"},
        {"type": "edit", "content": "x"},
        {"type": "edit", "id": first.pk, "run_id": str(first.run_id), "content": "x"},
        {"type": "edit", "id": first.pk},
        {"type": "edit", "run_id": "not-a-uuid", "content": "x"},
    ):
        assert '"type": "edit"' in await refused(socket, bad)
    # Nothing was archived or asked of the model by any of it.
    assert not any(archived for *_, archived in await stored("refusals"))

    # Archived already: an edit of a message that a regeneration took away.
    llm.reply("Madrid.")
    await socket.send_json_to({"type": "regenerate"})
    await receive_until(socket, "message", role="assistant")
    archived = await sync_to_async(Message.objects.filter(archived=True).first)()
    assert "no such message" in await refused(
        socket, {"type": "edit", "id": archived.pk, "content": "again"}
    )
    await socket.disconnect()


async def test_refused_while_a_turn_runs_in_this_tab_or_another(
    llm: ScriptedLLM, token: str
) -> None:
    socket = await two_turns(llm, token, "busy")
    other, _ = await open_chat("busy", token)
    first = await sync_to_async(Message.objects.filter(role="user").order_by("id").first)()
    llm.hang(30)
    await socket.send_json_to({"type": "message", "content": "take your time"})
    await receive_until(socket, "message", role="user")
    assert "being written" in await refused(socket, {"type": "regenerate"})
    await receive_until(other, "message", role="user")
    assert "being written" in await refused(
        other, {"type": "edit", "id": first.pk, "content": "changed"}
    )
    await socket.send_json_to({"type": "stop"})
    await receive_until(socket, "thinking_finished")
    assert not any(archived for *_, archived in await stored("busy"))
    await socket.disconnect()
    await other.disconnect()


async def test_older_messages_come_a_page_at_a_time(token: str) -> None:
    socket, frame = await open_chat("long", token)
    await socket.disconnect()
    assert frame["has_more"] is False

    @sync_to_async
    def fill() -> list[int]:
        from sessions_app.models import Session

        session = Session.objects.get(key="web:long")
        return [
            Message.objects.create(
                session=session, role="user" if n % 2 == 0 else "assistant", content=f"m{n}"
            ).pk
            for n in range(450)
        ]

    ids = await fill()
    socket, frame = await open_chat("long", token)
    assert [m["id"] for m in frame["messages"]] == ids[-200:]
    assert frame["has_more"] is True

    await socket.send_json_to({"type": "earlier", "before": ids[-200]})
    page = await receive_until(socket, "earlier")
    assert page[-1]["before"] == ids[-200] and page[-1]["has_more"] is True
    assert [m["id"] for m in page[-1]["messages"]] == ids[-400:-200]
    assert page[-1]["messages"][0]["content"] == f"m{450 - 400}"

    # Reaching back to a message: all of them from a few before it.
    await socket.send_json_to({"type": "earlier", "before": ids[-200], "to": ids[30]})
    page = await receive_until(socket, "earlier")
    assert [m["id"] for m in page[-1]["messages"]] == ids[20:-200]
    assert page[-1]["has_more"] is True

    await socket.send_json_to({"type": "earlier", "before": ids[5]})
    page = await receive_until(socket, "earlier")
    assert [m["id"] for m in page[-1]["messages"]] == ids[:5]
    assert page[-1]["has_more"] is False

    for bad in (
        {"type": "earlier"},
        {"type": "earlier", "before": "12"},
        {"type": "earlier", "before": 0},
        {"type": "earlier", "before": ids[5], "to": "x"},
    ):
        assert '"type": "earlier"' in await refused(socket, bad)
    await socket.disconnect()


async def test_refused_while_a_turn_waits_for_an_answer(
    llm: ScriptedLLM, token: str, settings: Any
) -> None:
    settings.AGENT_APPROVE_TOOLS = ["write_file"]
    socket = await two_turns(llm, token, "waiting")
    llm.tool_call("write_file", {"path": "a.txt", "content": "A"}).reply("Written.")
    await socket.send_json_to({"type": "message", "content": "write a.txt"})
    await receive_until(socket, "approval_request")
    await receive_until(socket, "thinking_finished")
    assert "waits for your answer" in await refused(socket, {"type": "regenerate"})
    # Answered, the turn goes on and ends; then the reply may be regenerated.
    request = await sync_to_async(Approval.objects.get)()
    await socket.send_json_to({"type": "approve", "id": request.call_id, "allow": False})
    await receive_until(socket, "message", role="assistant")
    llm.reply("Not written, as you said.")
    await socket.send_json_to({"type": "regenerate"})
    frames = await receive_until(socket, "message", role="assistant")
    assert frames[-1]["content"] == "Not written, as you said."
    assert not any(archived for *_, archived in (await stored("waiting"))[:4])
    await socket.disconnect()


async def test_two_regenerations_at_once_make_one(llm: ScriptedLLM, token: str) -> None:
    socket = await two_turns(llm, token, "twice")
    other, _ = await open_chat("twice", token)
    llm.reply("Madrid.")
    llm.reply("Barcelona?")
    await socket.send_json_to({"type": "regenerate"})
    await other.send_json_to({"type": "regenerate"})
    # Every tab sees the one regeneration's reply; one of them is told why the other was
    # not made (a turn was running, or the conversation had changed: it waited for it).
    seen = await receive_until(socket, "message", role="assistant")
    errors = [frame["message"] for frame in seen if frame["type"] == "error"]
    for _ in range(100):
        for tab in (socket, other):
            while not tab.output_queue.empty():
                frame = await tab.receive_json_from()
                if frame["type"] == "error":
                    errors.append(frame["message"])
        if errors:
            break
        await asyncio.sleep(0.1)
    assert len(errors) == 1 and ("meanwhile" in errors[0] or "being written" in errors[0])
    live = [(role, content) for role, content, archived in await stored("twice") if not archived]
    assert live[2:] == [("user", "and of Spain?"), ("assistant", "Madrid.")]
    assert llm.pending == 1  # the model was asked once
    await socket.disconnect()
    await other.disconnect()
