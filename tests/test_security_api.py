"""Attacks through the task API, tried as a second ordinary user or an outsider would: each
must stay refused."""

from __future__ import annotations

import json
import uuid

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agent.job_functions import run_queued_task
from sessions_app.models import Message, Run, Session
from tests.llm_server import ScriptedLLM

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("agent_settings")]


@pytest.fixture
def bob() -> User:
    return User.objects.create_user("bob", password="pw-bob-123")


@pytest.fixture
def bobs_session(bob: User) -> Session:
    session = Session.objects.create(key="api:plans", channel="api", chat_id="plans", owner=bob)
    Message.objects.create(session=session, role="user", content="bob's secret plan")
    return session


def test_another_users_tasks_are_not_there(api: APIClient, bobs_session: Session) -> None:
    run = Run.objects.create(session=bobs_session, channel="api", prompt="secret")
    for response in (
        api.get(f"/api/tasks/{run.pk}"),
        api.post(f"/api/tasks/{run.pk}/cancel"),
        api.get(f"/api/tasks/{uuid.uuid4()}"),
        api.get("/api/tasks/not-a-uuid"),
    ):
        assert response.status_code == 404 and response["Content-Type"] == "application/json"
    run.refresh_from_db()
    assert run.cancel_requested is False


def test_another_users_sessions_are_not_there(api: APIClient, bobs_session: Session) -> None:
    key = bobs_session.key
    assert api.get(f"/api/sessions/{key}").status_code == 404
    assert api.get(f"/api/sessions/{key}/messages").status_code == 404
    assert api.patch(f"/api/sessions/{key}", {"title": "mine"}, format="json").status_code == 404
    assert api.delete(f"/api/sessions/{key}").status_code == 404
    assert key not in [s["key"] for s in api.get("/api/sessions").json()]
    bobs_session.refresh_from_db()
    assert bobs_session.title == ""


def test_another_users_key_answers_like_an_unused_one(
    api: APIClient, llm: ScriptedLLM, bobs_session: Session
) -> None:
    """Keys are per user: naming Bob's key starts a session of one's own, exactly as a key
    nobody uses does, so the answers say nothing about which keys exist."""
    llm.reply("hello").reply("hello")
    answers = [
        api.post("/api/tasks", {"prompt": "hi", "session": key}, format="json")
        for key in (bobs_session.key, "api:never-used")
    ]
    assert [a.status_code for a in answers] == [200, 200]
    assert {a.json()["session"] for a in answers} == {bobs_session.key, "api:never-used"}
    assert "bob's secret plan" not in json.dumps(llm.requests)
    mine = Session.objects.get(key=bobs_session.key, owner__username="ada")
    assert mine.pk != bobs_session.pk
    assert list(bobs_session.messages.values_list("content", flat=True)) == ["bob's secret plan"]


def test_ownerless_sessions_are_out_of_reach(api: APIClient) -> None:
    Session.objects.create(key="cli:direct", channel="cli", chat_id="direct")
    for key in ("cli:direct", "heartbeat", "cron:1"):
        response = api.post("/api/tasks", {"prompt": "hi", "session": key}, format="json")
        assert response.status_code == 400 and "session" in response.json()
    assert not Message.objects.exists()


def test_anonymous_clients_reach_nothing_but_health() -> None:
    client = APIClient()
    assert client.get("/api/health").status_code == 200
    for method, path in [
        ("get", "/api/tools"),
        ("post", "/api/tasks"),
        ("get", f"/api/tasks/{uuid.uuid4()}"),
        ("get", "/api/sessions"),
        ("delete", "/api/sessions/web:x"),
        ("get", "/api/schema"),
        ("get", "/api/docs"),
    ]:
        response = getattr(client, method)(path)
        assert response.status_code in (401, 403), (method, path)


def test_a_logged_in_browser_needs_the_csrf_token_to_write(ada: User, llm: ScriptedLLM) -> None:
    browser = APIClient(enforce_csrf_checks=True)
    browser.login(username="ada", password="pw-ada-123")
    Session.objects.create(key="web:c", channel="web", chat_id="c", owner=ada)
    assert browser.get("/api/sessions").status_code == 200  # reading needs no token
    assert browser.post("/api/tasks", {"prompt": "hi"}, format="json").status_code == 403
    assert browser.delete("/api/sessions/web:c").status_code == 403
    assert Session.objects.filter(key="web:c").exists() and llm.requests == []


def test_a_queued_task_of_a_deleted_session_never_runs(api: APIClient, llm: ScriptedLLM) -> None:
    task = api.post(
        "/api/tasks", {"prompt": "later", "session": "api:doomed", "wait": False}, format="json"
    ).json()
    assert api.delete("/api/sessions/api:doomed").status_code == 204
    assert run_queued_task(task["id"]) == "missing"
    assert api.get(f"/api/tasks/{task['id']}").status_code == 404
    assert llm.requests == []
