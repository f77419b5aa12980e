"""One rule for session keys at every door: what the API makes, the chat page and its socket
open, and the reverse; what one door refuses, all refuse; nobody reaches another's."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from sessions_app import keys
from sessions_app.models import Session
from tests.llm_server import ScriptedLLM
from tests.ws import communicator, open_chat, receive_until

pytestmark = pytest.mark.usefixtures("agent_settings")
# The rule's own tests need no database; the doors' do, from other threads.
doors = pytest.mark.django_db(transaction=True)

GOOD_CHAT_IDS = ["abc", "a.b", "a@b", "-_-", "...", ".hidden", "x" * 190, "0"]
# Each refused for a reason of its own: the dot segments browsers resolve away, characters a
# path would need escaped, too long, empty.
BAD_CHAT_IDS = [".", "..", "a b", "a/b", "a?b", "a#b", "ü", "x" * 191, ""]


def client_of(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def page_client(username: str) -> Client:
    client = Client()
    client.force_login(User.objects.get(username=username))
    return client


def post_task(token: str, session: str, prompt: str) -> Any:
    return client_of(token).post(
        "/api/tasks", {"prompt": prompt, "session": session}, format="json"
    )


def pairs(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in messages]


def rows(data: Any) -> list[dict[str, Any]]:
    """A list answer's rows, whether it is paged or not."""
    return data["results"] if isinstance(data, dict) else data


# ---- the rule itself ---------------------------------------------------------------------


@pytest.mark.parametrize("chat_id", GOOD_CHAT_IDS)
def test_a_good_chat_id_makes_a_key_of_either_channel(chat_id: str) -> None:
    assert keys.is_chat_id(chat_id)
    for channel in keys.USER_CHANNELS:
        key = f"{channel}:{chat_id}"
        assert keys.is_user_key(key)
        assert keys.key_for_path(keys.path_for_key(key)) == key
    assert keys.path_for_key(f"web:{chat_id}") == chat_id
    assert keys.path_for_key(f"api:{chat_id}") == f"api:{chat_id}"


@pytest.mark.parametrize("chat_id", BAD_CHAT_IDS)
def test_a_bad_chat_id_makes_no_key(chat_id: str) -> None:
    assert not keys.is_chat_id(chat_id)
    assert not keys.is_user_key(f"web:{chat_id}") and not keys.is_user_key(f"api:{chat_id}")
    assert keys.key_for_path(chat_id) is None and keys.key_for_path(f"api:{chat_id}") is None


@pytest.mark.parametrize(
    "key", ["cli:direct", "cron:1", "heartbeat", "web:a:b", "api:a\n", "WEB:a", " api:a"]
)
def test_keys_of_no_user_are_not_user_keys(key: str) -> None:
    assert not keys.is_user_key(key)
    with pytest.raises(ValueError, match="not a key"):
        keys.path_for_key(key)


def test_urls_are_built_from_keys() -> None:
    assert reverse("chat-session", kwargs={"key": "web:a.b"}) == "/c/a.b/"
    assert reverse("chat-session", kwargs={"key": "api:x@y"}) == "/c/api:x@y/"
    assert reverse("session-messages", kwargs={"key": "api:x"}) == "/api/sessions/api:x/messages"


# ---- what the API makes opens in the page and the socket ----------------------------------


@doors
@pytest.mark.parametrize(("key", "path"), [("api:x", "api:x"), ("web:y.z", "y.z")])
async def test_a_session_the_api_made_opens_in_the_page_and_the_socket(
    llm: ScriptedLLM, token: str, key: str, path: str
) -> None:
    llm.reply("made by the API")
    task = await sync_to_async(post_task)(token, key, "hello from a script")
    assert task.status_code == 200 and task.json()["session"] == key

    page = await sync_to_async(lambda: page_client("ada").get(f"/c/{path}/"))()
    assert page.status_code == 200
    assert f'data-chat-id="{path}"'.encode() in page.content

    socket, history = await open_chat(path, token)
    assert pairs(history["messages"]) == [
        ("user", "hello from a script"),
        ("assistant", "made by the API"),
    ]
    # And the page goes on with it, in the same session the API sees.
    llm.reply("and continued on the page")
    await socket.send_json_to({"type": "message", "content": "more"})
    await receive_until(socket, "message", role="assistant")
    await socket.disconnect()
    socket, history = await open_chat(path, token)
    await socket.disconnect()
    assert pairs(history["messages"])[2:] == [
        ("user", "more"),
        ("assistant", "and continued on the page"),
    ]
    assert await Session.objects.filter(key=key).acount() == 1
    detail = await sync_to_async(client_of(token).get)(f"/api/sessions/{key}")
    assert detail.status_code == 200 and detail.json()["key"] == key


@doors
@pytest.mark.parametrize(("path", "key"), [("pg1", "web:pg1"), ("api:pg2", "api:pg2")])
async def test_a_chat_started_on_the_socket_goes_on_through_the_api(
    llm: ScriptedLLM, token: str, path: str, key: str
) -> None:
    llm.reply("first answer").reply("second answer")
    socket, _ = await open_chat(path, token)
    await socket.send_json_to({"type": "message", "content": "first question"})
    await receive_until(socket, "message", role="assistant")

    task = await sync_to_async(post_task)(token, key, "second question")
    assert task.status_code == 200
    assert task.json()["session"] == key and task.json()["text"] == "second answer"
    # The model saw the chat so far: it is one session, not a new one of the same name.
    sent = llm.requests[1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert sent[1]["content"] == "first question"
    # The open socket hears the API's turn too.
    frames = await receive_until(socket, "message", role="assistant")
    assert frames[-1]["content"] == "second answer"
    await socket.disconnect()


@doors
def test_the_session_list_names_each_session_by_a_key_every_door_takes(
    llm: ScriptedLLM, token: str
) -> None:
    llm.reply("one").reply("two")
    assert post_task(token, "api:listed", "a").status_code == 200
    assert post_task(token, "web:listed.too", "b").status_code == 200
    page = page_client("ada")
    listed = [session["key"] for session in rows(client_of(token).get("/api/sessions").json())]
    assert sorted(listed) == ["api:listed", "web:listed.too"]
    for key in listed:
        assert keys.is_user_key(key)
        assert client_of(token).get(f"/api/sessions/{key}").status_code == 200
        assert page.get(reverse("chat-session", kwargs={"key": key})).status_code == 200


# ---- what one door refuses, every door refuses --------------------------------------------


@doors
@pytest.mark.parametrize("chat_id", BAD_CHAT_IDS)
async def test_a_bad_chat_id_is_refused_at_every_door(
    llm: ScriptedLLM, token: str, chat_id: str
) -> None:
    for channel in keys.USER_CHANNELS:
        task = await sync_to_async(post_task)(token, f"{channel}:{chat_id}", "hi")
        assert task.status_code == 400 and "session" in task.json()
    segment = quote(chat_id, safe="")
    api = client_of(token)
    for channel in keys.USER_CHANNELS:
        detail = await sync_to_async(api.get)(f"/api/sessions/{channel}:{segment}")
        assert detail.status_code == 404
    page = await sync_to_async(page_client)("ada")
    for path in (segment, f"api:{segment}"):
        assert (await sync_to_async(page.get)(f"/c/{path}/")).status_code == 404
        socket = communicator(f"/ws/chat/{path}/?token={token}")
        connected, _ = await socket.connect()
        assert connected
        assert await socket.receive_output() == {"type": "websocket.close", "code": 4404}
        await socket.disconnect()
    assert llm.requests == []
    assert await Session.objects.acount() == 0


@doors
@pytest.mark.parametrize("key", ["cli:direct", "cron:1"])
async def test_sessions_of_no_user_are_reached_by_no_door(token: str, key: str) -> None:
    await Session.objects.acreate(key=key, channel=key.split(":")[0], chat_id=key.split(":")[1])
    assert (await sync_to_async(post_task)(token, key, "hi")).status_code == 400
    api = client_of(token)
    assert (await sync_to_async(api.get)(f"/api/sessions/{key}")).status_code == 404
    assert (await sync_to_async(api.delete)(f"/api/sessions/{key}")).status_code == 404
    page = await sync_to_async(page_client)("ada")
    assert (await sync_to_async(page.get)(f"/c/{key}/")).status_code == 404
    socket = communicator(f"/ws/chat/{key}/?token={token}")
    await socket.connect()
    assert (await socket.receive_output())["code"] == 4404
    await socket.disconnect()
    assert await Session.objects.filter(key=key).acount() == 1  # untouched


@doors
async def test_the_heartbeat_is_reached_by_no_door(token: str) -> None:
    """`heartbeat` is a key without a channel: as a path it is just a web chat id."""
    await Session.objects.acreate(key="heartbeat", channel="heartbeat", chat_id="heartbeat")
    assert (await sync_to_async(post_task)(token, "heartbeat", "hi")).status_code == 400
    api = client_of(token)
    assert (await sync_to_async(api.get)("/api/sessions/heartbeat")).status_code == 404
    socket, history = await open_chat("heartbeat", token)
    await socket.disconnect()
    assert history["messages"] == []
    mine = await Session.objects.aget(key="web:heartbeat")
    assert mine.owner_id is not None
    assert await Session.objects.filter(key="heartbeat", owner=None).acount() == 1


@doors
async def test_a_web_session_has_one_address_on_the_page_and_the_socket(token: str) -> None:
    """`web:x` is `/c/x/`; a second spelling would make one chat two entries of the list."""
    page = await sync_to_async(page_client)("ada")
    assert (await sync_to_async(page.get)("/c/web:x/")).status_code == 404
    socket = communicator(f"/ws/chat/web:x/?token={token}")
    await socket.connect()
    assert (await socket.receive_output())["code"] == 4404
    await socket.disconnect()


@doors
async def test_a_refused_path_still_asks_for_a_login_first() -> None:
    socket = communicator("/ws/chat/../")
    await socket.connect()
    assert (await socket.receive_output())["code"] == 4401
    await socket.disconnect()
    page = await sync_to_async(Client().get)("/c/api:x/")
    assert page.status_code == 302 and page["Location"].startswith("/accounts/login/")


# ---- nobody reaches another user's session -------------------------------------------------


@doors
async def test_another_users_api_session_stays_theirs(
    llm: ScriptedLLM, token: str, other_token: str
) -> None:
    llm.reply("for ada only")
    assert (await sync_to_async(post_task)(token, "api:secret", "ada's plans")).status_code == 200

    bob_api = client_of(other_token)
    for path in ("/api/sessions/api:secret", "/api/sessions/api:secret/messages"):
        assert (await sync_to_async(bob_api.get)(path)).status_code == 404
    assert (await sync_to_async(bob_api.delete)("/api/sessions/api:secret")).status_code == 404

    # The same key is a session of bob's own: empty, and ada's stays as it was.
    socket, history = await open_chat("api:secret", other_token)
    assert history["messages"] == []
    llm.reply("for bob")
    await socket.send_json_to({"type": "message", "content": "bob's note"})
    await receive_until(socket, "message", role="assistant")
    await socket.disconnect()
    socket, history = await open_chat("api:secret", token)
    await socket.disconnect()
    assert pairs(history["messages"]) == [("user", "ada's plans"), ("assistant", "for ada only")]
    assert await Session.objects.filter(key="api:secret").acount() == 2
