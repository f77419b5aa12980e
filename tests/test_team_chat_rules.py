"""The rules of a shared chat: a tool call that waits is answered by the member whose message
started the turn or by a team admin, at the socket and the API alike, and the audit log
names who answered; any member stops a turn; a member edits or regenerates only their own
messages; and what the team's chats used is shown per member, in `/api/usage` and on the
team's admin page."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from agent.doors.api.usage_views import teams_usage
from sessions_app.models import Approval, Message, Run
from teams_app import services as teams
from tests.llm_server import ScriptedLLM
from tests.ws import open_chat, receive_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]

USAGE = {"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500}
PRICES = json.dumps({"openai/scripted": {"input": 500, "output": 1500}})
COST = 1000 * 500e-6 + 500 * 1500e-6  # $1.25 a call
WRITE = ("write_file", {"path": "notes.md", "content": "shared"})
NOT_BOBS = "only Ada, who sent the message, or a team admin may answer"


def person(name: str, **extra: Any) -> tuple[User, str, APIClient]:
    user = User.objects.create_user(
        name, password=f"pw-{name}-123", first_name=name.title(), **extra
    )
    token = Token.objects.create(user=user).key
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return user, token, client


@pytest.fixture
def crew(settings: Any) -> dict[str, Any]:
    """`ada`, `bob` and `cat` in the team `ops`, `cat` its admin; `eve` in `sales`; `root`
    staff in no team. `write_file` waits for a yes."""
    settings.AGENT_APPROVE_TOOLS = ["write_file"]
    people = {name: person(name) for name in ("ada", "bob", "cat", "eve")}
    people["root"] = person("root", is_staff=True, is_superuser=True)
    ops = teams.create_team(slug="ops", name="Operations")
    teams.set_members(team=ops, users=[people[name][0] for name in ("ada", "bob", "cat")])
    teams.set_admins(team=ops, users=[people["cat"][0]])
    sales = teams.create_team(slug="sales", name="Sales")
    teams.set_members(team=sales, users=[people["eve"][0]])
    return {"people": people, "ops": ops}


def start_team_chat(client: APIClient) -> str:
    response = client.post("/api/sessions", {"team": "ops"}, format="json")
    assert response.status_code == 201, response.content
    return str(response.json()["key"])


def approval_entries(root: APIClient) -> list[dict[str, Any]]:
    answer = root.get("/api/audit", {"object": "approval"})
    assert answer.status_code == 200, answer.content
    return [entry for entry in answer.json() if entry["action"] == "update"]


# ---- approvals ------------------------------------------------------------------------------


async def test_the_sender_answers_at_the_socket_and_another_member_is_refused(
    crew: dict[str, Any], llm: ScriptedLLM, workspace: Path
) -> None:
    people = crew["people"]
    ada_user = people["ada"][0]
    key = await sync_to_async(start_team_chat)(people["ada"][2])
    ada, _ = await open_chat(key, people["ada"][1])
    bob, _ = await open_chat(key, people["bob"][1])
    llm.tool_call(*WRITE).reply("Written.")
    await ada.send_json_to({"type": "message", "content": "write the notes"})

    asked = (await receive_until(ada, "approval_request"))[-1]
    assert (await receive_until(bob, "approval_request"))[-1] == asked
    assert asked["answerable_by"] == {
        "author": {"id": ada_user.pk, "name": "Ada"},
        "team_admins": True,
    }
    await receive_until(ada, "thinking_finished")

    await bob.send_json_to({"type": "approve", "id": asked["id"], "allow": True})
    error = (await receive_until(bob, "error"))[-1]
    assert error["message"] == NOT_BOBS
    statuses = await sync_to_async(list)(Approval.objects.values_list("status", flat=True))
    assert statuses == ["pending"]
    # A tab that opens now is asked too, and told who may answer.
    late, _ = await open_chat(key, people["cat"][1])
    assert (await receive_until(late, "approval_request"))[-1] == asked
    await late.disconnect()

    await ada.send_json_to({"type": "approve", "id": asked["id"], "allow": True})
    for socket in (ada, bob):
        resolved = (await receive_until(socket, "approval_resolved"))[-1]
        assert resolved["allow"] is True and resolved["reason"] == "answered"
    await receive_until(ada, "message", role="assistant", content="Written.")
    await ada.disconnect()
    await bob.disconnect()
    assert (workspace / "teams" / "ops" / "notes.md").read_text() == "shared"

    [entry] = await sync_to_async(approval_entries)(people["root"][2])
    assert entry["actor"] == "ada"
    assert entry["changes"]["status"] == ["pending", "allowed"]
    assert entry["changes"]["answered_by"] == ["None", str(ada_user.pk)]


async def test_a_team_admin_answers_at_the_socket(crew: dict[str, Any], llm: ScriptedLLM) -> None:
    people = crew["people"]
    key = await sync_to_async(start_team_chat)(people["ada"][2])
    ada, _ = await open_chat(key, people["ada"][1])
    cat, _ = await open_chat(key, people["cat"][1])
    llm.tool_call(*WRITE).reply("I did not write it.")
    await ada.send_json_to({"type": "message", "content": "write the notes"})
    asked = (await receive_until(cat, "approval_request"))[-1]
    await receive_until(ada, "thinking_finished")

    await cat.send_json_to({"type": "approve", "id": asked["id"], "allow": False})
    resolved = (await receive_until(ada, "approval_resolved"))[-1]
    assert resolved["allow"] is False
    await receive_until(cat, "message", role="assistant", content="I did not write it.")
    await ada.disconnect()
    await cat.disconnect()

    approval = await sync_to_async(Approval.objects.select_related("answered_by").get)()
    assert approval.status == "declined" and approval.answered_by.username == "cat"
    [entry] = await sync_to_async(approval_entries)(people["root"][2])
    assert entry["actor"] == "cat" and entry["changes"]["status"] == ["pending", "declined"]


def test_the_api_lists_and_answers_by_the_same_rule(crew: dict[str, Any], llm: ScriptedLLM) -> None:
    people = crew["people"]
    ada_user = people["ada"][0]
    key = start_team_chat(people["ada"][2])
    llm.tool_call(*WRITE).reply("Written.")
    task = people["ada"][2].post(
        "/api/tasks", {"prompt": "write the notes", "session": key}, format="json"
    )
    assert task.status_code == 200, task.content
    assert task.json()["status"] == "waiting"
    [call] = task.json()["pending"]
    url = f"/api/tasks/{task.json()['id']}/approve"

    def pending(name: str) -> list[dict[str, Any]]:
        return list(people[name][2].get("/api/approvals").json()["pending"])

    [listed] = pending("ada")
    assert (listed["id"], listed["session"]) == (call["id"], key)
    assert listed["answerable_by"] == {
        "author": {"id": ada_user.pk, "name": "Ada"},
        "team_admins": True,
    }
    assert [c["id"] for c in pending("cat")] == [call["id"]]  # the team's admin
    assert pending("bob") == [] and pending("eve") == [] and pending("root") == []

    refused = people["bob"][2].post(url, {"call_id": call["id"], "allow": True}, format="json")
    assert refused.status_code == 403 and refused.json()["detail"] == NOT_BOBS
    stranger = people["eve"][2].post(url, {"call_id": call["id"], "allow": True}, format="json")
    assert stranger.status_code == 404
    assert Approval.objects.get().status == "pending"

    answered = people["cat"][2].post(url, {"call_id": call["id"], "allow": True}, format="json")
    assert answered.status_code == 200, answered.content
    assert answered.json()["status"] == "succeeded" and answered.json()["text"] == "Written."
    # The turn went on as Ada's, whose message it answers.
    assert Run.objects.get().author == ada_user
    [entry] = approval_entries(people["root"][2])
    assert entry["actor"] == "cat" and entry["changes"]["status"] == ["pending", "allowed"]
    assert pending("ada") == [] and pending("cat") == []


def test_the_sender_answers_through_the_api(crew: dict[str, Any], llm: ScriptedLLM) -> None:
    people = crew["people"]
    key = start_team_chat(people["bob"][2])
    llm.tool_call(*WRITE).reply("Written.")
    task = people["bob"][2].post("/api/tasks", {"prompt": "write", "session": key}, format="json")
    [call] = task.json()["pending"]
    url = f"/api/tasks/{task.json()['id']}/approve"
    refused = people["ada"][2].post(url, {"call_id": call["id"], "allow": True}, format="json")
    assert refused.status_code == 403
    assert refused.json()["detail"] == "only Bob, who sent the message, or a team admin may answer"
    answered = people["bob"][2].post(url, {"call_id": call["id"], "allow": True}, format="json")
    assert answered.status_code == 200 and answered.json()["status"] == "succeeded"
    [entry] = approval_entries(people["root"][2])
    assert entry["actor"] == "bob"


# ---- stop, regenerate, edit -----------------------------------------------------------------


async def test_any_member_stops_a_turn(crew: dict[str, Any], llm: ScriptedLLM) -> None:
    people = crew["people"]
    key = await sync_to_async(start_team_chat)(people["ada"][2])
    ada, _ = await open_chat(key, people["ada"][1])
    bob, _ = await open_chat(key, people["bob"][1])
    llm.hang(30)
    await ada.send_json_to({"type": "message", "content": "take your time"})
    await receive_until(bob, "thinking_started")
    await bob.send_json_to({"type": "stop"})
    await receive_until(ada, "thinking_finished")
    await receive_until(bob, "thinking_finished")
    run = await sync_to_async(Run.objects.get)()
    assert run.status == Run.Status.CANCELLED
    await ada.disconnect()
    await bob.disconnect()


async def test_a_member_edits_and_regenerates_their_own_messages_alone(
    crew: dict[str, Any], llm: ScriptedLLM
) -> None:
    people = crew["people"]
    key = await sync_to_async(start_team_chat)(people["ada"][2])
    ada, _ = await open_chat(key, people["ada"][1])
    bob, _ = await open_chat(key, people["bob"][1])
    llm.reply("Hello Ada.")
    await ada.send_json_to({"type": "message", "content": "hi from ada"})
    await receive_until(ada, "message", role="assistant")
    await receive_until(bob, "thinking_finished")
    llm.reply("Hello Bob.")
    await bob.send_json_to({"type": "message", "content": "hi from bob"})
    await receive_until(bob, "message", role="assistant")
    await receive_until(ada, "thinking_finished")
    users = await sync_to_async(list)(Message.objects.filter(role="user").order_by("id"))
    adas, bobs = users

    refusals = [
        {"type": "regenerate"},  # the latest message is Bob's
        {"type": "edit", "id": bobs.pk, "content": "changed"},
        {"type": "edit", "run_id": str(bobs.run_id), "content": "changed"},
    ]
    for frame in refusals:
        await ada.send_json_to(frame)
        error = (await receive_until(ada, "error"))[-1]
        assert error["message"] == "you can only regenerate or edit your own messages"
    archived = await sync_to_async(Message.objects.filter(archived=True).exists)()
    assert not archived
    assert len(llm.requests) == 2

    llm.reply("Hello again, Bob.")
    await bob.send_json_to({"type": "regenerate"})
    frames = await receive_until(bob, "message", role="assistant", content="Hello again, Bob.")
    assert next(f for f in frames if f["type"] == "archived")["id"] == bobs.pk
    await receive_until(ada, "thinking_finished")

    llm.reply("Hello, Ada the editor.")
    await ada.send_json_to({"type": "edit", "id": adas.pk, "content": "hi, edited by ada"})
    frames = await receive_until(ada, "message", role="assistant", content="Hello, Ada the editor.")
    assert next(f for f in frames if f["type"] == "archived")["id"] == adas.pk
    await receive_until(bob, "thinking_finished")
    await ada.disconnect()
    await bob.disconnect()
    live = await sync_to_async(list)(
        Message.objects.filter(archived=False).order_by("id").values_list("role", "content")
    )
    assert live == [("user", "hi, edited by ada"), ("assistant", "Hello, Ada the editor.")]


# ---- usage ----------------------------------------------------------------------------------


def line(calls: int, runs: int) -> dict[str, Any]:
    return {
        "runs": runs,
        **{key: calls * value for key, value in USAGE.items()},
        "cost": pytest.approx(calls * COST),
        "priced_cost": pytest.approx(calls * COST),
        "unpriced_runs": 0,
    }


def test_usage_per_team_and_member(
    crew: dict[str, Any],
    llm: ScriptedLLM,
    agent_settings: Any,
    django_assert_max_num_queries: Any,
) -> None:
    agent_settings.AGENT_MODEL_PRICES = PRICES
    agent_settings.AGENT_APPROVE_TOOLS = []
    people = crew["people"]
    key = start_team_chat(people["ada"][2])

    def ask(name: str, session: str | None = key, calls: int = 1) -> None:
        for _ in range(calls - 1):
            llm.tool_call("list_dir", {"path": "."}, usage=USAGE)
        llm.reply("ok", usage=USAGE)
        fields = {"prompt": "go", **({"session": session} if session else {})}
        answer = people[name][2].post("/api/tasks", fields, format="json")
        assert answer.status_code == 200 and answer.json()["status"] == "succeeded"

    ask("ada", calls=2)
    ask("ada")
    ask("bob")
    ask("ada", session=None)  # her own chat: not the team's

    ops = people["ada"][2].get("/api/usage").json()["teams"]
    assert ops == [
        {
            "team": "ops",
            "name": "Operations",
            **line(4, 3),
            "members": [
                {"id": people["ada"][0].pk, "user": "ada", "name": "Ada", **line(3, 2)},
                {"id": people["bob"][0].pk, "user": "bob", "name": "Bob", **line(1, 1)},
            ],
        }
    ]
    # Her own usage counts every run of hers, the team chat's too.
    assert people["ada"][2].get("/api/usage").json()["total"]["runs"] == 3
    assert people["bob"][2].get("/api/usage").json()["teams"] == ops
    nothing = {**line(0, 0), "cost": 0.0, "priced_cost": 0.0}
    assert people["eve"][2].get("/api/usage").json()["teams"] == [
        {"team": "sales", "name": "Sales", **nothing, "members": []}
    ]
    every = people["root"][2].get("/api/usage", {"days": 1}).json()["teams"]
    assert [team["team"] for team in every] == ["ops", "sales"]
    assert every[0] == ops[0]
    with django_assert_max_num_queries(2):
        teams_usage(people["root"][0], 30)

    text = (
        signed_in("root").get(reverse("admin:teams_app_team_change", args=[crew["ops"].pk])).content
    )
    table = text.decode()
    used = table[table.index("<th>Sender</th>") : table.index("</table>", table.index("Sender"))]
    rows = [row.split("</td><td>") for row in used.split("<tr><td>")[1:]]
    cells = {row[0]: row[1:4] for row in rows}
    assert cells["All members"] == ["3", "6000", f"${4 * COST:.2f}"]
    assert cells["ada"] == ["2", "4500", f"${3 * COST:.2f}"]
    assert cells["bob"] == ["1", "1500", f"${COST:.2f}"]

    # The team's admin sees it on the team's page too.
    page = signed_in("cat").get(reverse("admin:teams_app_team_change", args=[crew["ops"].pk]))
    assert page.status_code == 200 and b"<th>Sender</th>" in page.content


def signed_in(username: str) -> Client:
    """A client signed in through the admin's own login page, as a person would be."""
    client = Client()
    answer = client.post(
        reverse("admin:login") + "?next=/admin/",
        {"username": username, "password": f"pw-{username}-123", "next": "/admin/"},
    )
    assert answer.status_code == 302, answer.content[:400]
    return client
