"""Team chats: one conversation a team shares, reached by every member at every door and by
no one else, whose agent works in the team's folder and remembers what the team taught it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from sessions_app.models import Memory, Session
from teams_app import services as teams
from tests.llm_server import ScriptedLLM
from tests.ws import communicator, open_chat, receive_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]


def person(name: str) -> tuple[User, str, APIClient]:
    user = User.objects.create_user(name, password=f"pw-{name}-123", first_name=name.title())
    token = Token.objects.create(user=user).key
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return user, token, client


@pytest.fixture
def crew() -> dict[str, Any]:
    """`ada` and `bob` in the team `ops`; `eve` in `sales`; each with a token and a client."""
    people = {name: person(name) for name in ("ada", "bob", "eve")}
    ops = teams.create_team(slug="ops", name="Operations")
    teams.set_members(team=ops, users=[people["ada"][0], people["bob"][0]])
    sales = teams.create_team(slug="sales")
    teams.set_members(team=sales, users=[people["eve"][0]])
    return {"people": people, "ops": ops}


def start_team_chat(client: APIClient, team: str = "ops", **extra: Any) -> dict[str, Any]:
    response = client.post("/api/sessions", {"team": team, **extra}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def test_a_member_starts_a_team_chat_every_member_lists_it_and_no_one_else(crew) -> None:
    people = crew["people"]
    chat = start_team_chat(people["ada"][2], title="Incident 42")
    assert chat["key"].startswith("team:") and chat["team"] == "ops"
    assert chat["title"] == "Incident 42"

    bob_sees = people["bob"][2].get("/api/sessions").json()
    assert [s["key"] for s in bob_sees] == [chat["key"]]
    assert people["eve"][2].get("/api/sessions").json() == []
    key = chat["key"]
    assert people["bob"][2].get(f"/api/sessions/{key}").status_code == 200
    for path in (f"/api/sessions/{key}", f"/api/sessions/{key}/messages"):
        assert people["eve"][2].get(path).status_code == 404
    assert people["eve"][2].patch(f"/api/sessions/{key}", {"title": "x"}).status_code == 404
    refused = people["eve"][2].post("/api/tasks", {"prompt": "hi", "session": key}, format="json")
    assert refused.status_code == 404


def test_a_team_of_which_one_is_not_a_member_is_refused(crew) -> None:
    eve = crew["people"]["eve"][2]
    response = eve.post("/api/sessions", {"team": "ops"}, format="json")
    assert response.status_code == 400
    assert "you are not a member of a team 'ops'" in json.dumps(response.json())
    assert not Session.objects.filter(team__isnull=False).exists()


def test_only_a_team_admin_or_staff_deletes_a_team_chat(crew) -> None:
    people = crew["people"]
    key = start_team_chat(people["ada"][2])["key"]
    assert people["bob"][2].delete(f"/api/sessions/{key}").status_code == 403
    teams.set_admins(team=crew["ops"], users=[people["bob"][0]])
    assert people["bob"][2].delete(f"/api/sessions/{key}").status_code == 204
    assert not Session.objects.filter(key=key).exists()


async def test_members_stream_each_others_turns_and_see_who_wrote_what(
    crew, llm: ScriptedLLM
) -> None:
    people = crew["people"]
    chat = await sync_to_async(start_team_chat)(people["ada"][2])
    key = chat["key"]
    ada, _ = await open_chat(key, people["ada"][1])
    bob, _ = await open_chat(key, people["bob"][1])
    llm.reply("Hello from the agent, answering Ada.", chunks=6, chunk_delay=0.02)
    await ada.send_json_to({"type": "message", "content": "hi from ada"})

    seen_by_bob = await receive_until(bob, "thinking_finished")
    started = next(f for f in seen_by_bob if f["type"] == "thinking_started")
    assert started["author"]["name"] == "Ada"
    user_frame = next(f for f in seen_by_bob if f["type"] == "message" and f["role"] == "user")
    assert user_frame["author"] == {"id": people["ada"][0].pk, "name": "Ada"}
    streamed = "".join(f["content"] for f in seen_by_bob if f["type"] == "stream_chunk")
    assert streamed == "Hello from the agent, answering Ada."
    await receive_until(ada, "thinking_finished")

    llm.reply("And now Bob.", chunks=3)
    await bob.send_json_to({"type": "message", "content": "hi from bob"})
    seen_by_ada = await receive_until(ada, "thinking_finished")
    assert "".join(f["content"] for f in seen_by_ada if f["type"] == "stream_chunk") == (
        "And now Bob."
    )
    await receive_until(bob, "thinking_finished")
    await ada.disconnect()
    await bob.disconnect()

    messages = await sync_to_async(
        lambda: people["bob"][2].get(f"/api/sessions/{key}/messages").json()
    )()
    authors = [(m["role"], (m["author"] or {}).get("name")) for m in messages]
    assert authors == [
        ("user", "Ada"),
        ("assistant", None),
        ("user", "Bob"),
        ("assistant", None),
    ]
    third, history = await open_chat(key, people["ada"][1])
    shown = [
        (m["role"], m.get("author", m.get("answering", {})).get("name"))
        for m in history["messages"]
    ]
    assert shown == [("user", "Ada"), ("assistant", "Ada"), ("user", "Bob"), ("assistant", "Bob")]
    await third.disconnect()


async def test_a_stranger_cannot_open_the_socket(crew) -> None:
    people = crew["people"]
    key = (await sync_to_async(start_team_chat)(people["ada"][2]))["key"]
    socket = communicator(f"/ws/chat/{key}/?token={people['eve'][1]}")
    connected, _ = await socket.connect()
    assert connected  # accepted first, then closed as a chat that is not there
    assert (await socket.receive_output(timeout=5))["code"] == 4404
    assert not await sync_to_async(Session.objects.filter(key=key, owner__isnull=False).exists)()


async def test_a_file_one_members_turn_writes_the_others_turn_reads_in_the_team_folder(
    crew, llm: ScriptedLLM, workspace: Path
) -> None:
    people = crew["people"]
    key = (await sync_to_async(start_team_chat)(people["ada"][2]))["key"]
    ada, _ = await open_chat(key, people["ada"][1])
    llm.tool_call("write_file", {"path": "runbook.md", "content": "restart the pump"})
    llm.reply("Written.")
    await ada.send_json_to({"type": "message", "content": "note the runbook"})
    await receive_until(ada, "thinking_finished")
    await ada.disconnect()

    bob, _ = await open_chat(key, people["bob"][1])
    llm.tool_call("read_file", {"path": "runbook.md"})
    llm.reply("It says to restart the pump.")
    await bob.send_json_to({"type": "message", "content": "what does the runbook say?"})
    frames = await receive_until(bob, "thinking_finished")
    [result] = [f for f in frames if f["type"] == "tool_result"]
    assert "restart the pump" in result["result"]
    await bob.disconnect()

    assert (workspace / "teams" / "ops" / "runbook.md").read_text() == "restart the pump"
    users = workspace / "users"
    assert not list(users.rglob("runbook.md")) if users.exists() else True


async def test_a_team_chat_cannot_reach_a_members_own_folder(
    crew, llm: ScriptedLLM, workspace: Path
) -> None:
    people = crew["people"]
    own = workspace / "users" / "ada"
    own.mkdir(parents=True)
    (own / "diary.txt").write_text("private")
    key = (await sync_to_async(start_team_chat)(people["ada"][2]))["key"]
    ada, _ = await open_chat(key, people["ada"][1])
    llm.tool_call("read_file", {"path": "../../users/ada/diary.txt"})
    llm.reply("I cannot.")
    await ada.send_json_to({"type": "message", "content": "read my diary"})
    frames = await receive_until(ada, "thinking_finished")
    [result] = [f for f in frames if f["type"] == "tool_result"]
    assert "private" not in result["result"] and "Error" in result["result"]
    await ada.disconnect()


async def test_team_memory_is_the_teams_and_not_a_members(crew, llm: ScriptedLLM) -> None:
    people = crew["people"]
    team_id = crew["ops"].group_id
    await sync_to_async(Memory.objects.create)(team_id=team_id, content="The pump is P-7.")
    await sync_to_async(Memory.objects.create)(owner=people["ada"][0], content="Ada likes tea.")
    key = (await sync_to_async(start_team_chat)(people["bob"][2]))["key"]
    bob, _ = await open_chat(key, people["bob"][1])
    llm.reply("P-7.")
    await bob.send_json_to({"type": "message", "content": "which pump?"})
    await receive_until(bob, "thinking_finished")
    await bob.disconnect()
    system = llm.requests[-1]["messages"][0]["content"]
    assert "The pump is P-7." in system and "Ada likes tea." not in system


async def test_presence_shows_who_is_looking_and_drops_one_who_leaves(crew) -> None:
    people = crew["people"]
    key = (await sync_to_async(start_team_chat)(people["ada"][2]))["key"]
    ada, _ = await open_chat(key, people["ada"][1])
    assert await ada.receive_json_from() == {
        "type": "presence",
        "viewers": [{"id": people["ada"][0].pk, "name": "Ada"}],
    }
    bob, _ = await open_chat(key, people["bob"][1])
    both = [{"id": people["ada"][0].pk, "name": "Ada"}, {"id": people["bob"][0].pk, "name": "Bob"}]
    assert (await receive_until(bob, "presence", viewers=both))[-1]["viewers"] == both
    assert (await receive_until(ada, "presence", viewers=both))[-1]["viewers"] == both
    await bob.disconnect()
    alone = [{"id": people["ada"][0].pk, "name": "Ada"}]
    await receive_until(ada, "presence", viewers=alone)
    await ada.disconnect()


async def test_a_member_removed_from_the_team_loses_the_chat_at_once(crew) -> None:
    people = crew["people"]
    key = (await sync_to_async(start_team_chat)(people["ada"][2]))["key"]
    bob, _ = await open_chat(key, people["bob"][1])
    await sync_to_async(crew["ops"].group.user_set.remove)(people["bob"][0])
    frames = []
    while True:
        output = await bob.receive_output(timeout=2)
        if output["type"] == "websocket.close":
            assert output["code"] == 4404
            break
        frames.append(json.loads(output["text"]))
    assert any("no longer a member" in f.get("message", "") for f in frames)
    found = await sync_to_async(people["bob"][2].get)(f"/api/sessions/{key}")
    assert found.status_code == 404


def test_the_openai_door_lands_a_member_in_the_team_chat_and_refuses_a_stranger(
    crew, llm: ScriptedLLM
) -> None:
    from django.test import Client

    people = crew["people"]
    key = start_team_chat(people["ada"][2])["key"]
    body = {"model": "agentsite", "messages": [{"role": "user", "content": "status?"}]}

    def ask(name: str) -> Any:
        return Client().post(
            "/v1/chat/completions",
            body,
            content_type="application/json",
            headers={"Authorization": f"Bearer {people[name][1]}", "X-Session-Key": key},
        )

    llm.reply("All green.")
    answered = ask("bob")
    assert answered.status_code == 200, answered.content
    assert answered.json()["choices"][0]["message"]["content"] == "All green."
    assert answered.headers["X-Session-Key"] == key
    refused = ask("eve")
    assert refused.status_code == 404
    assert refused.json()["error"]["code"] == "session_not_found"
    runs = list(Session.objects.get(key=key).runs.values_list("author", flat=True))
    assert runs == [people["bob"][0].pk]
