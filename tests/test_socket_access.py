"""A chat socket lasts as long as what let it in: its user active, the token it came with,
the login its cookie holds. It looks before each frame it acts on; a change made through
Django reaches it at once; one made behind Django's back is found by its process's poll.
A deactivated user's turns stop, and their waiting approvals end."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session as LoginSession
from django.db.models.signals import post_delete
from django.test import Client
from rest_framework.authtoken.models import Token

from agent import accounts
from agent.doors import chat as consumers
from agent.doors import revocation
from agent.doors.credentials import Revoked
from sessions_app.models import Approval, Run, Session
from tests.conftest import folder_of
from tests.llm_server import ScriptedLLM
from tests.ws import HOST, ORIGIN, communicator, open_chat, receive_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]

INACTIVE = revocation.REVOKED_TEXT[Revoked.INACTIVE]
TOKEN_GONE = revocation.REVOKED_TEXT[Revoked.TOKEN]
SIGNED_OUT = revocation.REVOKED_TEXT[Revoked.LOGIN]


@pytest.fixture
def no_poll(monkeypatch: pytest.MonkeyPatch) -> None:
    """The process's poll never comes round: what a socket does is its own check's, or the
    channel layer's message's."""
    monkeypatch.setattr(revocation, "POLL_SECONDS", 3600.0)
    monkeypatch.setattr(revocation, "BACKSTOP_SECONDS", 3600.0)


async def until_closed(socket: WebsocketCommunicator, timeout: float = 5) -> tuple[list, int]:
    """The frames a socket gets until it is closed, and the close code."""
    frames = []
    while (output := await socket.receive_output(timeout=timeout))["type"] != "websocket.close":
        frames.append(json.loads(output["text"]))
    return frames, output["code"]


@sync_to_async
def login(username: str = "ada") -> Client:
    """A browser signed in as `username` (a login session of its own)."""
    user = User.objects.filter(username=username).first()
    if user is None:
        user = User.objects.create_user(username, password="pw-ada-123")
    client = Client()
    client.force_login(user)
    return client


async def open_with_cookie(client: Client, chat_id: str) -> WebsocketCommunicator:
    cookie = (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())
    socket = communicator(f"/ws/chat/{chat_id}/", headers=[HOST, ORIGIN, cookie])
    connected, _ = await socket.connect()
    assert connected
    assert (await socket.receive_json_from())["type"] == "history"
    return socket


@contextmanager
def unheard(signal: Any, receiver: Any, sender: Any, uid: str) -> Iterator[None]:
    """`receiver` does not hear `signal` meanwhile: a change made behind its back."""
    signal.disconnect(receiver, sender=sender, dispatch_uid=uid)
    try:
        yield
    finally:
        signal.connect(receiver, sender=sender, dispatch_uid=uid)


async def answers_help(socket: WebsocketCommunicator) -> None:
    await socket.send_json_to({"type": "message", "content": "/help"})
    reply = (await receive_until(socket, "message", role="assistant"))[-1]
    assert reply["content"].startswith("Commands")


# ---- a socket looks before it acts --------------------------------------------------------


@pytest.mark.parametrize(
    "frame",
    [
        {"type": "message", "content": "touch the marker"},
        {"type": "message", "content": "/new"},
        {"type": "approve", "id": "call_1", "allow": True},
        {"type": "regenerate"},
        {"type": "edit", "id": 1, "content": "touch the marker"},
        {"type": "model", "model": "openai/scripted"},
        {"type": "earlier", "before": 1},
        {"type": "stop"},
    ],
    ids=["message", "command", "approve", "regenerate", "edit", "model", "earlier", "stop"],
)
@pytest.mark.usefixtures("no_poll")
async def test_a_socket_whose_user_was_deactivated_acts_on_nothing(
    llm: ScriptedLLM, token: str, workspace: Path, frame: dict[str, Any]
) -> None:
    marker = folder_of(workspace, "ada") / "marker"
    llm.tool_call("exec", {"command": "touch marker"}).reply("touched")
    socket, _ = await open_chat("deact", token)
    # Behind every signal's back: only the socket's own look finds it.
    await User.objects.filter(username="ada").aupdate(is_active=False)

    await socket.send_json_to(frame)
    frames, code = await until_closed(socket)
    assert frames == [{"type": "error", "message": INACTIVE}]
    assert code == consumers.CLOSE_UNAUTHENTICATED
    assert llm.requests == [] and not marker.exists()
    assert not await Run.objects.aexists()
    assert (await Session.objects.aget(key="web:deact")).model == ""


@pytest.mark.usefixtures("no_poll")
async def test_a_socket_whose_token_was_deleted_runs_nothing(llm: ScriptedLLM, token: str) -> None:
    llm.reply("never")
    socket, _ = await open_chat("tok", token)
    with unheard(post_delete, accounts.end_token, Token, "agent.token_deleted"):
        await Token.objects.filter(key=token).adelete()
    await socket.send_json_to({"type": "message", "content": "hello"})
    frames, code = await until_closed(socket)
    assert frames == [{"type": "error", "message": TOKEN_GONE}]
    assert code == consumers.CLOSE_UNAUTHENTICATED
    assert llm.requests == []


@pytest.mark.usefixtures("no_poll")
async def test_a_socket_whose_login_is_gone_runs_nothing(llm: ScriptedLLM) -> None:
    llm.reply("never")
    socket = await open_with_cookie(await login(), "gone-login")
    await LoginSession.objects.all().adelete()  # as the sessions' cleanup of a login would
    await socket.send_json_to({"type": "message", "content": "hello"})
    frames, code = await until_closed(socket)
    assert frames == [{"type": "error", "message": SIGNED_OUT}]
    assert code == consumers.CLOSE_UNAUTHENTICATED
    assert llm.requests == []


# ---- a change made through Django reaches the socket at once -------------------------------


@sync_to_async
def deactivate(username: str = "ada") -> None:
    user = User.objects.get(username=username)
    user.is_active = False
    user.save()


@sync_to_async
def change_password(username: str = "ada") -> None:
    user = User.objects.get(username=username)
    user.set_password("a-new-password-456")
    user.save()


@pytest.mark.usefixtures("no_poll")
async def test_deactivating_the_user_closes_every_socket_of_theirs(token: str) -> None:
    by_token, _ = await open_chat("one", token)
    by_cookie = await open_with_cookie(await login(), "two")
    await deactivate()
    for socket in (by_token, by_cookie):
        frames, code = await until_closed(socket, timeout=1)
        assert frames == [{"type": "error", "message": INACTIVE}]
        assert code == consumers.CLOSE_UNAUTHENTICATED


@pytest.mark.usefixtures("no_poll")
async def test_deleting_a_token_closes_the_sockets_it_opened_and_no_other(token: str) -> None:
    by_token, _ = await open_chat("one", token)
    by_cookie = await open_with_cookie(await login(), "two")
    await Token.objects.filter(key=token).adelete()
    frames, code = await until_closed(by_token, timeout=1)
    assert frames == [{"type": "error", "message": TOKEN_GONE}]
    assert code == consumers.CLOSE_UNAUTHENTICATED
    await answers_help(by_cookie)
    await by_cookie.disconnect()


@pytest.mark.usefixtures("no_poll")
async def test_logging_out_closes_the_sockets_of_that_login_and_no_other() -> None:
    leaving, staying = await login(), await login()
    first = await open_with_cookie(leaving, "one")
    second = await open_with_cookie(leaving, "two")
    other = await open_with_cookie(staying, "one")
    response = await sync_to_async(leaving.post)("/accounts/logout/")
    assert response.status_code == 302
    for socket in (first, second):
        frames, code = await until_closed(socket, timeout=1)
        assert frames == [{"type": "error", "message": SIGNED_OUT}]
        assert code == consumers.CLOSE_UNAUTHENTICATED
    await answers_help(other)
    await other.disconnect()


@pytest.mark.usefixtures("no_poll")
async def test_a_password_change_closes_the_logins_it_ends(token: str) -> None:
    by_cookie = await open_with_cookie(await login(), "one")
    by_token, _ = await open_chat("two", token)
    await change_password()
    frames, code = await until_closed(by_cookie, timeout=1)
    assert frames == [{"type": "error", "message": SIGNED_OUT}]
    assert code == consumers.CLOSE_UNAUTHENTICATED
    await answers_help(by_token)  # a token does not hang on the password
    await by_token.disconnect()


# ---- a change made behind Django's back: the process's poll ---------------------------------


async def test_the_poll_closes_a_socket_revoked_behind_every_signal(
    token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Whatever the layer: on Redis the poll is only a backstop and comes round less often.
    monkeypatch.setattr(revocation, "BACKSTOP_SECONDS", revocation.POLL_SECONDS)
    socket, _ = await open_chat("polled", token)
    started = time.monotonic()
    await User.objects.filter(username="ada").aupdate(is_active=False)
    frames, code = await until_closed(socket, timeout=2)
    assert time.monotonic() - started < 1.0
    assert frames == [{"type": "error", "message": INACTIVE}]
    assert code == consumers.CLOSE_UNAUTHENTICATED


# ---- what was running --------------------------------------------------------------------


@pytest.mark.usefixtures("no_poll")
async def test_deactivating_a_user_stops_their_turns_and_ends_their_waiting_approvals(
    llm: ScriptedLLM, token: str, settings: Any
) -> None:
    settings.AGENT_APPROVE_TOOLS = ["write_file"]
    # Each turn's one model call: neither gets to call it again.
    llm.tool_call("exec", {"command": "sleep 30"})
    working, _ = await open_chat("work", token)
    await working.send_json_to({"type": "message", "content": "sleep"})
    await receive_until(working, "tool_call")
    llm.tool_call("write_file", {"path": "f.txt", "content": "F"})
    asking, _ = await open_chat("ask", token)
    await asking.send_json_to({"type": "message", "content": "write"})
    await receive_until(asking, "thinking_finished")
    # Both tabs closed: the turns are the user's, no socket's.
    await working.disconnect()
    await asking.disconnect()

    await deactivate()
    deadline = time.monotonic() + 5
    while True:
        runs = {run.session.key: run.status async for run in Run.objects.select_related("session")}
        if runs == {"web:work": "cancelled", "web:ask": "cancelled"}:
            break
        assert time.monotonic() < deadline, runs
        await asyncio.sleep(0.1)
    assert [a.status async for a in Approval.objects.all()] == ["cancelled"]
    assert len(llm.requests) == 2  # neither turn called the model again


@pytest.mark.usefixtures("no_poll")
async def test_a_turn_started_with_a_deleted_token_stops(llm: ScriptedLLM, token: str) -> None:
    llm.tool_call("exec", {"command": "sleep 30"}).reply("slept")
    socket, _ = await open_chat("tok-turn", token)
    await socket.send_json_to({"type": "message", "content": "sleep"})
    await receive_until(socket, "tool_call")
    await Token.objects.filter(key=token).adelete()
    frames, code = await until_closed(socket, timeout=2)
    assert frames[-1] == {"type": "error", "message": TOKEN_GONE}
    assert code == consumers.CLOSE_UNAUTHENTICATED
    deadline = time.monotonic() + 5
    while (await Run.objects.aget()).status != "cancelled":
        assert time.monotonic() < deadline
        await asyncio.sleep(0.1)
    assert len(llm.requests) == 1
