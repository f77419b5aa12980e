"""The login cookie opens the chat socket only from a page of the site: a handshake that
carries it without an Origin is anonymous, while a token needs no Origin."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.test import Client

from sessions_app.models import Session
from tests.ws import HOST, ORIGIN, communicator

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]


@sync_to_async
def login_cookie(username: str = "ada") -> tuple[bytes, bytes]:
    """The `cookie` header of a browser logged in as `username`."""
    if not User.objects.filter(username=username).exists():
        User.objects.create_user(username, password="pw-cookie-1")
    client = Client()
    client.force_login(User.objects.get(username=username))
    return (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())


async def first_output(headers: list[tuple[bytes, bytes]], path: str = "/ws/chat/o1/") -> dict:
    socket = communicator(path, headers=headers)
    connected, _ = await socket.connect()
    assert connected, headers
    output = await socket.receive_output()
    await socket.disconnect()
    return output


async def test_a_cookie_without_an_origin_is_anonymous() -> None:
    cookie = await login_cookie()
    assert await first_output([HOST, cookie]) == {"type": "websocket.close", "code": 4401}
    assert await first_output([cookie]) == {"type": "websocket.close", "code": 4401}


async def test_a_cookie_with_the_sites_origin_opens_the_chat() -> None:
    output = await first_output([HOST, ORIGIN, await login_cookie()])
    assert output["type"] == "websocket.send" and '"type": "history"' in output["text"]


async def test_a_token_needs_no_origin_and_outranks_a_cookie(token: str) -> None:
    for chat, headers in (("t1", [HOST]), ("t2", []), ("t3", [HOST, await login_cookie("bob")])):
        output = await first_output(headers, f"/ws/chat/{chat}/?token={token}")
        assert output["type"] == "websocket.send" and '"type": "history"' in output["text"]
    owners = Session.objects.values_list("key", "owner__username")
    assert sorted([row async for row in owners]) == [
        ("web:t1", "ada"),
        ("web:t2", "ada"),
        ("web:t3", "ada"),
    ]


async def test_a_foreign_origin_is_refused_with_a_token_or_a_cookie(token: str) -> None:
    foreign = (b"origin", b"https://evil.example")
    for path, headers in (
        (f"/ws/chat/o1/?token={token}", [HOST, foreign]),
        ("/ws/chat/o1/", [HOST, foreign, await login_cookie()]),
    ):
        socket = communicator(path, headers=headers)
        connected, _ = await socket.connect()
        assert not connected, headers
