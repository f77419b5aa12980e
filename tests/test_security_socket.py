"""Attacks through the chat WebSocket, tried as an ordinary user or an outsider would:
each must stay refused."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.db.models.signals import post_delete
from django.utils import timezone
from rest_framework.test import APIClient

from agent.doors import chat as consumers
from agent.doors import following
from agent.job_functions import fail_dead_runs
from agent.turn import on_session_deleted
from sessions_app.models import Message, Run, Session
from tests.llm_server import ScriptedLLM
from tests.ws import HOST, ORIGIN, communicator, open_chat, receive_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]


@sync_to_async
def contents(owner: str, key: str) -> list[str | None]:
    return list(
        Message.objects.filter(session__owner__username=owner, session__key=key)
        .order_by("id")
        .values_list("content", flat=True)
    )


@sync_to_async
def delete_through_the_api(username: str, key: str) -> int:
    client = APIClient()
    client.force_authenticate(User.objects.get(username=username))
    return client.delete(f"/api/sessions/{key}").status_code


async def drain(socket: object, seconds: float = 0.3) -> list[dict]:
    frames = []
    while not await socket.receive_nothing(timeout=seconds):
        frames.append(await socket.receive_json_from())
    return frames


# ---- who may open a socket ------------------------------------------------------------


async def test_an_anonymous_socket_is_closed_with_4401() -> None:
    socket = communicator("/ws/chat/abc/")
    connected, _ = await socket.connect()
    assert connected
    assert await socket.receive_output() == {"type": "websocket.close", "code": 4401}
    await socket.disconnect()  # and the consumer ends cleanly


async def test_a_bad_token_is_anonymous() -> None:
    socket = communicator("/ws/chat/abc/?token=nope")
    await socket.connect()
    assert (await socket.receive_output())["code"] == 4401


@pytest.mark.parametrize(
    ("origin", "host"),
    [
        (b"https://evil.example", b"127.0.0.1:8000"),  # another site
        (b"http://127.0.0.1:9999", b"127.0.0.1:8000"),  # another port of this host
        (b"https://127.0.0.1:8000", b"127.0.0.1:8000"),  # another scheme
        (b"http://localhost:8000", b"127.0.0.1:8000"),  # another name
        (b"http://evil.example:8000", b"evil.example:8000"),  # DNS rebinding: not our name
        (b"null", b"127.0.0.1:8000"),  # sandboxed iframes, file:// pages
        (b"http://127.0.0.1:8000", None),  # no Host to compare with
    ],
)
async def test_a_cross_origin_handshake_is_refused(
    token: str, origin: bytes, host: bytes | None
) -> None:
    headers = [(b"origin", origin)] + ([(b"host", host)] if host else [])
    socket = communicator(f"/ws/chat/abc/?token={token}", headers=headers)
    connected, _ = await socket.connect()
    assert not connected


async def test_the_sites_own_origin_and_trusted_origins_are_let_in(token: str, settings) -> None:
    settings.CSRF_TRUSTED_ORIGINS = ["https://*.example.org"]
    for headers in (
        [HOST, ORIGIN],
        [HOST, (b"origin", b"https://chat.example.org")],
        [HOST],  # a script with a token sends no Origin
    ):
        socket = communicator(f"/ws/chat/ok/?token={token}", headers=headers)
        connected, _ = await socket.connect()
        assert connected, headers
        assert (await socket.receive_json_from())["type"] == "history"
        await socket.disconnect()


# ---- one user's socket never reaches another's chat ----------------------------------


async def test_another_users_chat_id_is_a_chat_of_ones_own(
    llm: ScriptedLLM, token: str, other_token: str
) -> None:
    llm.reply("private")
    alice, _ = await open_chat("p1", token)
    await alice.send_json_to({"type": "message", "content": "secret"})
    await receive_until(alice, "message", role="assistant")

    bob, history = await open_chat("p1", other_token)
    assert history["messages"] == [] and history["running"] is False

    llm.reply("still private")
    await alice.send_json_to({"type": "message", "content": "more secrets"})
    await receive_until(alice, "message", role="assistant", content="still private")
    assert await bob.receive_nothing(timeout=0.3)

    llm.reply("hello bob")
    await bob.send_json_to({"type": "message", "content": "bob here"})
    await receive_until(bob, "message", role="assistant", content="hello bob")
    assert "secret" not in json.dumps(llm.requests[-1]["messages"])
    assert await contents("ada", "web:p1") == ["secret", "private", "more secrets", "still private"]
    assert await contents("bob", "web:p1") == ["bob here", "hello bob"]
    await alice.disconnect()
    await bob.disconnect()


@sync_to_async
def delete_in_bulk(username: str, key: str) -> int:
    """As the admin's "delete selected" does: one queryset delete."""
    return Session.objects.filter(owner__username=username, key=key).delete()[0]


@sync_to_async
def delete_the_user(username: str, key: str) -> int:
    return User.objects.filter(username=username).delete()[0]


@pytest.mark.parametrize(
    "delete",
    [delete_through_the_api, delete_in_bulk, delete_the_user],
    ids=["api", "admin-bulk", "user-deleted"],
)
async def test_a_deleted_chat_closes_its_sockets(llm: ScriptedLLM, token: str, delete) -> None:
    first, _ = await open_chat("gone", token)
    second, _ = await open_chat("gone", token)
    assert await delete("ada", "web:gone")
    for socket in (first, second):
        frames = []
        while (output := await socket.receive_output(timeout=5))["type"] != "websocket.close":
            frames.append(json.loads(output["text"]))
        assert output["code"] == consumers.CLOSE_DELETED
        assert frames == [{"type": "error", "message": "this chat was deleted"}]


async def test_a_stale_socket_never_crosses_into_the_next_owner_of_its_chat_id(
    llm: ScriptedLLM, token: str, other_token: str
) -> None:
    """Alice deletes her chat but keeps its socket; Bob opens the same chat id. Even if the
    close never reached Alice's socket, it neither sees nor writes Bob's chat."""
    alice, _ = await open_chat("x", token)
    post_delete.disconnect(on_session_deleted, sender=Session, dispatch_uid="agent.session_closed")
    try:
        assert await delete_through_the_api("ada", "web:x") == 204
    finally:
        post_delete.connect(on_session_deleted, sender=Session, dispatch_uid="agent.session_closed")

    bob, history = await open_chat("x", other_token)
    assert history["messages"] == []
    llm.reply("for bob only")
    await bob.send_json_to({"type": "message", "content": "bob's words"})
    await receive_until(bob, "message", role="assistant", content="for bob only")
    assert await alice.receive_nothing(timeout=0.3)

    await alice.send_json_to({"type": "message", "content": "alice writes"})
    assert (await alice.receive_json_from()) == {
        "type": "error",
        "message": "this conversation was deleted",
    }
    assert (await alice.receive_output())["code"] == consumers.CLOSE_DELETED
    assert await contents("bob", "web:x") == ["bob's words", "for bob only"]
    assert not await Message.objects.filter(content="alice writes").aexists()
    assert len(llm.requests) == 1
    await bob.disconnect()


async def test_deleting_a_chat_stops_its_running_turn(
    llm: ScriptedLLM, token: str, caplog: pytest.LogCaptureFixture
) -> None:
    llm.tool_call("exec", {"command": "sleep 30"}).reply("never")
    socket, _ = await open_chat("busy", token)
    await socket.send_json_to({"type": "message", "content": "work slowly"})
    await receive_until(socket, "tool_call")
    assert await delete_through_the_api("ada", "web:busy") == 204
    while (await socket.receive_output(timeout=5))["type"] != "websocket.close":
        pass
    for _ in range(100):  # the turn notices within a poll and ends without a trace
        if not consumers._turns:
            break
        await asyncio.sleep(0.05)
    assert not consumers._turns
    assert len(llm.requests) == 1
    assert not await Session.objects.filter(key="web:busy").aexists()
    assert not await Run.objects.aexists() and not await Message.objects.aexists()
    assert "Traceback" not in caplog.text and "IntegrityError" not in caplog.text


# ---- input as the API takes it ---------------------------------------------------------


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        ('{"type": "message", "content": "\\ud800 lone"}', "surrogate"),
        ('{"type": "message", "content": "nul \\u0000 inside"}', "NUL"),
        ('{"type": "message", "content": "   "}', "empty"),
        (json.dumps({"type": "message", "content": "x" * 100_001}), "longer than"),
        ("x" * 200_000, "at most"),
    ],
    ids=["lone-surrogate", "nul", "blank", "too-long", "oversized-frame"],
)
async def test_the_socket_refuses_what_the_api_refuses(
    llm: ScriptedLLM, token: str, frame: str, reason: str
) -> None:
    socket, _ = await open_chat("v1", token)
    await socket.send_to(text_data=frame)
    error = await socket.receive_json_from()
    assert error["type"] == "error" and reason in error["message"]
    await socket.send_json_to({"type": "message", "content": "/help"})  # still open
    await receive_until(socket, "message", role="assistant")
    await socket.disconnect()
    assert llm.requests == [] and not await Run.objects.aexists()

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    content = json.loads(frame)["content"] if frame.startswith("{") else frame
    response = await sync_to_async(api.post)(
        "/api/tasks", json.dumps({"prompt": content}), content_type="application/json"
    )
    assert response.status_code == 400 and "prompt" in response.json()


# ---- how much a user may ask ----------------------------------------------------------


async def test_the_socket_and_the_api_share_one_turn_limit(
    llm: ScriptedLLM, token: str, settings
) -> None:
    settings.AGENT_TURN_RATE = "2/min"
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    llm.reply("from the api").reply("from the socket")
    post = sync_to_async(api.post)
    assert (await post("/api/tasks", {"prompt": "one"}, format="json")).status_code == 200

    socket, _ = await open_chat("r1", token)
    await socket.send_json_to({"type": "message", "content": "two"})
    await receive_until(socket, "message", role="assistant", content="from the socket")
    await socket.send_json_to({"type": "message", "content": "three"})
    limited = await socket.receive_json_from()
    assert limited["type"] == "error" and "too many" in limited["message"]
    assert 0 < limited["retry_after"] <= 60
    await socket.send_json_to({"type": "message", "content": "/help"})  # commands are free
    await receive_until(socket, "message", role="assistant")
    await socket.disconnect()

    throttled = await post("/api/tasks", {"prompt": "four"}, format="json")
    assert throttled.status_code == 429 and int(throttled["Retry-After"]) > 0
    assert len(llm.requests) == 2


async def test_a_socket_queues_only_a_few_turns(llm: ScriptedLLM, token: str, settings) -> None:
    settings.AGENT_TURN_RATE = "1000/min"
    llm.hang(3)  # the first turn holds the session while the rest arrive
    socket, _ = await open_chat("q1", token)
    for number in range(10):
        await socket.send_json_to({"type": "message", "content": f"message {number}"})
    refused = [f for f in await drain(socket) if f["type"] == "error"]
    assert len(refused) == 10 - consumers.MAX_PENDING_TURNS
    assert all("already waiting" in f["message"] for f in refused)
    await socket.send_json_to({"type": "stop"})  # a stop always gets through
    await receive_until(socket, "stopped", message="Stopped 1 task.")
    await socket.disconnect()


# ---- a turn whose process died ----------------------------------------------------------


async def test_a_dead_turn_is_failed_by_the_sweep_and_the_chat_shows_it(
    token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(following, "FOLLOW_SECONDS", 0.1)
    socket, _ = await open_chat("z1", token)
    await socket.disconnect()
    session = await Session.objects.aget(key="web:z1")
    long_ago = timezone.now() - timedelta(minutes=5)
    dead = await Run.objects.acreate(
        session=session, channel="api", prompt="x", status="running", last_alive=long_ago
    )

    socket, history = await open_chat("z1", token)
    assert history["running"] is False  # last marked alive long ago
    assert await sync_to_async(fail_dead_runs)() == 1
    frames = await receive_until(socket, "message", role="assistant")
    assert [f["type"] for f in frames] == ["thinking_finished", "message"]
    assert frames[0]["run_id"] == str(dead.pk)
    assert "the process running this turn stopped" in frames[1]["content"]
    await socket.disconnect()
    await dead.arefresh_from_db()
    assert dead.status == "failed" and dead.finished is not None
