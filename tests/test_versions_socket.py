"""Earlier versions of a conversation over the chat socket: the history marks a message that
replaced others with their ids, a `version` frame brings one as it stood when it was
replaced (a version replaced inside it left out), only of the socket's own chat, and an
edit of the first message names the chat again unless its owner named it."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sessions_app.models import Message, Session
from tests.llm_server import ScriptedLLM
from tests.test_rerun_socket import ask, two_turns
from tests.ws import open_chat, receive_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]


@sync_to_async
def user_messages(chat: str) -> list[Message]:
    return list(Message.objects.filter(session__key=f"web:{chat}", role="user").order_by("id"))


@sync_to_async
def title(chat: str) -> str:
    return Session.objects.get(key=f"web:{chat}").title


async def edit(socket: Any, message: Message, content: str) -> None:
    await socket.send_json_to({"type": "edit", "id": message.pk, "content": content})
    await receive_until(socket, "message", role="assistant")


def said(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in messages]


async def test_versions_come_with_the_history_and_one_at_a_time(
    llm: ScriptedLLM, token: str, other_token: str
) -> None:
    socket = await two_turns(llm, token, "versions")
    france, spain = await user_messages("versions")
    assert await title("versions") == "capital of France?"
    llm.reply("Rome.")
    await edit(socket, spain, "and of Italy?")
    llm.reply("Berlin.")
    await edit(socket, france, "capital of Germany?")
    assert await title("versions") == "capital of Germany?"
    llm.reply("Berlin, again.")
    await socket.send_json_to({"type": "regenerate"})
    await receive_until(socket, "message", role="assistant")

    *_, italy, germany, again = await user_messages("versions")
    reloaded, frame = await open_chat("versions", token)
    await reloaded.disconnect()
    assert said(frame["messages"]) == [
        ("user", "capital of Germany?"),
        ("assistant", "Berlin, again."),
    ]
    # Edited once, then answered again: both earlier versions, oldest first.
    assert frame["messages"][0]["versions"] == {"earlier": [france.pk, germany.pk], "edited": True}

    # The first version as it stood: the second message as edited then, not as first said.
    await socket.send_json_to({"type": "version", "id": france.pk})
    [*_, shown] = await receive_until(socket, "version")
    assert shown["id"] == france.pk
    assert said(shown["messages"]) == [
        ("user", "capital of France?"),
        ("assistant", "Paris."),
        ("user", "and of Italy?"),
        ("assistant", "Rome."),
    ]
    await socket.send_json_to({"type": "version", "id": spain.pk})
    [*_, shown] = await receive_until(socket, "version")
    assert said(shown["messages"]) == [("user", "and of Spain?"), ("assistant", "Rome, I think.")]
    await socket.send_json_to({"type": "version", "id": germany.pk})
    [*_, shown] = await receive_until(socket, "version")
    assert said(shown["messages"]) == [("user", "capital of Germany?"), ("assistant", "Berlin.")]

    # Nothing replaced the live message (nor one that is not a message), and another chat's
    # versions are not this one's to show.
    for asked in (again.pk, 10**9):
        await socket.send_json_to({"type": "version", "id": asked})
        [*_, error] = await receive_until(socket, "error")
        assert "no earlier version" in error["message"]
    stranger, _ = await open_chat("versions", other_token)
    await stranger.send_json_to({"type": "version", "id": france.pk})
    [*_, error] = await receive_until(stranger, "error")
    assert "no earlier version" in error["message"]
    await socket.send_json_to({"type": "version", "id": "1"})
    [*_, error] = await receive_until(socket, "error")
    assert '{"type": "version", "id": <message id>}' in error["message"]
    await stranger.disconnect()
    await socket.disconnect()
    assert italy.content == "and of Italy?"


async def test_a_chat_its_owner_named_keeps_its_name(llm: ScriptedLLM, token: str) -> None:
    socket, _ = await open_chat("named", token)
    llm.reply("Paris.")
    await ask(socket, "capital of France?")
    await sync_to_async(Session.objects.filter(key="web:named").update)(title="Geography")
    [france] = await user_messages("named")
    llm.reply("Berlin.")
    await edit(socket, france, "capital of Germany?")
    assert await title("named") == "Geography"
    await socket.disconnect()
