"""Shared chats through the API and their page: a personal chat shared, as it was then, with a
team and a named person; read by them and by nobody else (a 404, as another person's chat);
taken back by its owner alone; and continued in a reader's own chat, whose history the
scripted model gets on that chat's next turn."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from sessions_app.models import ChatShare, Message, Session
from sessions_app.services import get_or_create_session
from teams_app.services import create_team, set_members
from tests.llm_server import ScriptedLLM

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]

CHAT = "web:shareme"
SHARE_FIELDS = {"id", "url", "title", "owner", "teams", "people", "source", "created"}


def client_of(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def people(ada: User) -> dict[str, User]:
    """ada shares; bob is in her team, cy is named, dan is neither."""
    folks = {"ada": ada}
    for name in ("bob", "cy", "dan"):
        folks[name] = User.objects.create_user(name, password=f"pw-{name}-123")
    folks["bob"].first_name = "Bob"
    folks["bob"].save()
    support = create_team(slug="support", name="Support desk")
    set_members(team=support, users=[ada, folks["bob"]])
    create_team(slug="billing", name="Billing")  # a team ada is not in
    return folks


@pytest.fixture
def chat(people: dict[str, User], llm: ScriptedLLM) -> Session:
    """ada's web chat: a tool call, its result, and the reply."""
    llm.tool_call("write_file", {"path": "hello.txt", "content": "Hello World"})
    llm.reply("Created **hello.txt**.")
    task = client_of(people["ada"]).post(
        "/api/tasks", {"prompt": "create hello.txt", "session": CHAT}, format="json"
    )
    assert task.status_code == 200, task.json()
    return Session.objects.get(key=CHAT, owner=people["ada"])


def share(owner: User, body: dict[str, Any], key: str = CHAT) -> Any:
    return client_of(owner).post(f"/api/sessions/{key}/shares", body, format="json")


@pytest.fixture
def shared(chat: Session, people: dict[str, User]) -> dict[str, Any]:
    made = share(people["ada"], {"teams": ["support"], "people": ["cy"]})
    assert made.status_code == 201, made.json()
    return dict(made.json())


def test_a_chat_is_shared_with_a_team_and_a_person(shared: dict[str, Any]) -> None:
    assert set(shared) == SHARE_FIELDS
    assert len(shared["id"]) >= 16
    assert shared["url"] == f"http://testserver/shared/{shared['id']}/"
    assert shared["title"] == "create hello.txt"
    assert shared["owner"] == {"username": "ada", "name": "ada"}
    assert shared["teams"] == ["support"] and shared["people"] == ["cy"]
    assert shared["source"] == CHAT


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"teams": ["nosuch"]}, "teams"),
        ({"teams": ["billing"]}, "teams"),  # a team, but not one of hers
        ({"people": ["nobody"]}, "people"),
        ({}, "detail"),
        ({"teams": [], "people": []}, "detail"),
        ({"teams": ["support"], "title": "mine"}, "title"),
        ({"people": "cy"}, "people"),
    ],
)
def test_bad_readers_are_a_400_naming_the_field(
    chat: Session, people: dict[str, User], body: dict[str, Any], field: str
) -> None:
    answer = share(people["ada"], body)
    assert answer.status_code == 400
    assert field in answer.json(), answer.json()
    assert not ChatShare.objects.exists()


def test_an_inactive_person_is_no_one_to_share_with(chat: Session, people: dict[str, User]) -> None:
    people["cy"].is_active = False
    people["cy"].save()
    answer = share(people["ada"], {"people": ["cy"]})
    assert answer.status_code == 400 and "people" in answer.json()


def test_only_the_owner_shares_a_chat_and_only_one_that_says_something(
    chat: Session, people: dict[str, User]
) -> None:
    # bob has no chat of that key: hers is none of his.
    assert share(people["bob"], {"teams": ["support"]}).status_code == 404
    assert share(people["ada"], {"teams": ["support"]}, key="web:nosuch").status_code == 404
    get_or_create_session(key="web:empty", owner=people["ada"])
    empty = share(people["ada"], {"teams": ["support"]}, key="web:empty")
    assert empty.status_code == 400 and "no messages" in empty.json()["detail"]
    assert APIClient().post(f"/api/sessions/{CHAT}/shares", {}, format="json").status_code in (
        401,
        403,
    )


def test_the_team_and_the_person_read_it_with_its_tool_cards(
    shared: dict[str, Any], people: dict[str, User]
) -> None:
    for reader in ("bob", "cy", "ada"):
        answer = client_of(people[reader]).get(f"/api/shares/{shared['id']}")
        assert answer.status_code == 200, reader
        body = answer.json()
        assert set(body) == SHARE_FIELDS | {"messages"}
        assert body["source"] == (CHAT if reader == "ada" else None)
    messages = body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    call = messages[1]["tool_calls"][0]
    assert call["function"]["name"] == "write_file"
    assert messages[2]["tool_call_id"] == call["id"] and messages[2]["name"] == "write_file"
    assert isinstance(messages[2].get("duration_ms"), int)  # as the chat's tool card has it
    assert messages[3]["content"] == "Created **hello.txt**."


def test_anyone_else_gets_a_404(shared: dict[str, Any], people: dict[str, User]) -> None:
    dan = client_of(people["dan"])
    share_id = shared["id"]
    assert dan.get(f"/api/shares/{share_id}").status_code == 404
    assert dan.post(f"/api/shares/{share_id}/continue").status_code == 404
    assert dan.delete(f"/api/shares/{share_id}").status_code == 404
    assert dan.get("/api/shares/nosuchshareatall").status_code == 404
    assert dan.get("/api/shares").json() == {"mine": [], "with_me": []}
    assert APIClient().get(f"/api/shares/{share_id}").status_code in (401, 403)


def test_a_team_is_read_by_its_members_now(shared: dict[str, Any], people: dict[str, User]) -> None:
    bob = people["bob"]
    bob.groups.clear()  # out of the team: out of its shares
    assert client_of(bob).get(f"/api/shares/{shared['id']}").status_code == 404
    bob.groups.add(people["ada"].groups.get(name="support"))
    assert client_of(bob).get(f"/api/shares/{shared['id']}").status_code == 200
    bob.is_active = False
    bob.save()
    assert client_of(bob).get(f"/api/shares/{shared['id']}").status_code == 404


def test_the_lists_say_what_i_shared_and_what_was_shared_with_me(
    shared: dict[str, Any], people: dict[str, User]
) -> None:
    mine = client_of(people["ada"]).get("/api/shares").json()
    assert [s["id"] for s in mine["mine"]] == [shared["id"]] and mine["with_me"] == []
    assert "messages" not in mine["mine"][0]
    for reader in ("bob", "cy"):
        theirs = client_of(people[reader]).get("/api/shares").json()
        assert theirs["mine"] == []
        assert [s["id"] for s in theirs["with_me"]] == [shared["id"]]
        assert theirs["with_me"][0]["owner"]["username"] == "ada"


def test_the_snapshot_stays_as_it_was_shared_and_outlives_the_chat(
    shared: dict[str, Any], people: dict[str, User], llm: ScriptedLLM
) -> None:
    ada, bob = client_of(people["ada"]), client_of(people["bob"])
    llm.reply("Something new.")
    ada.post("/api/tasks", {"prompt": "and now?", "session": CHAT}, format="json")
    assert len(bob.get(f"/api/shares/{shared['id']}").json()["messages"]) == 4

    assert ada.delete(f"/api/sessions/{CHAT}").status_code == 204
    kept = bob.get(f"/api/shares/{shared['id']}").json()
    assert len(kept["messages"]) == 4
    assert ada.get(f"/api/shares/{shared['id']}").json()["source"] is None


def test_only_the_owner_takes_a_share_back(shared: dict[str, Any], people: dict[str, User]) -> None:
    bob = client_of(people["bob"])
    assert bob.delete(f"/api/shares/{shared['id']}").status_code == 404
    assert bob.get(f"/api/shares/{shared['id']}").status_code == 200
    assert client_of(people["ada"]).delete(f"/api/shares/{shared['id']}").status_code == 204
    assert bob.get(f"/api/shares/{shared['id']}").status_code == 404
    assert Session.objects.filter(key=CHAT).exists()  # the chat itself stays


def test_continuing_makes_a_chat_whose_history_the_model_reads(
    shared: dict[str, Any], people: dict[str, User], llm: ScriptedLLM
) -> None:
    bob = client_of(people["bob"])
    made = bob.post(f"/api/shares/{shared['id']}/continue")
    assert made.status_code == 201
    key, url = made.json()["key"], made.json()["url"]
    assert key.startswith("web:") and url == f"http://testserver/c/{key[4:]}/"
    session = Session.objects.get(key=key)
    assert session.owner == people["bob"]
    assert session.title == "create hello.txt (continued)"
    listed = [s["key"] for s in bob.get("/api/sessions").json()]
    assert key in listed
    stored = list(Message.objects.filter(session=session).order_by("id"))
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]

    llm.reply("You created hello.txt.")
    task = bob.post("/api/tasks", {"prompt": "what did we make?", "session": key}, format="json")
    assert task.status_code == 200 and task.json()["text"] == "You created hello.txt."
    sent = llm.requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert "create hello.txt" in sent[1]["content"]
    assert sent[2]["tool_calls"][0]["function"]["name"] == "write_file"
    assert sent[3]["tool_call_id"] == sent[2]["tool_calls"][0]["id"]
    assert sent[4]["content"] == "Created **hello.txt**."
    assert "what did we make?" in sent[5]["content"]
    # The owner's chat is untouched, and hers alone.
    assert Message.objects.filter(session__key=CHAT).count() == 4


def test_the_page_shows_the_snapshot_to_its_readers_alone(
    shared: dict[str, Any], people: dict[str, User]
) -> None:
    path = f"/shared/{shared['id']}/"
    anonymous = Client().get(path)
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]

    bob = Client()
    bob.force_login(people["bob"])
    page = bob.get(path)
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="shared-snapshot" type="application/json"' in html
    assert "Shared by ada on" in html
    assert "Continue in my own chat" in html
    assert f"/api/shares/{shared['id']}/continue" in html
    assert "<script>" not in html  # the policy runs no inline script

    dan = Client()
    dan.force_login(people["dan"])
    assert dan.get(path).status_code == 404
    assert dan.get("/shared/nosuchshareatall/").status_code == 404


def test_the_chat_page_offers_share(people: dict[str, User]) -> None:
    ada = Client()
    ada.force_login(people["ada"])
    html = ada.get("/").content.decode()
    assert 'id="share-open"' in html and "chat/share.js" in html


def test_the_admin_shows_a_share_read_only(shared: dict[str, Any], people: dict[str, User]) -> None:
    admin = User.objects.create_superuser("root", password="pw-root-123")
    client = Client()
    client.force_login(admin)
    page = client.get(f"/admin/sessions_app/chatshare/{shared['id']}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "[calls write_file]" in html and f"/shared/{shared['id']}/" in html
    assert client.get("/admin/sessions_app/chatshare/").status_code == 200
    assert client.get("/admin/sessions_app/chatshare/add/").status_code == 403
