"""The sessions endpoints the chat page uses."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from sessions_app.models import Message, Session

pytestmark = pytest.mark.django_db


def make_session(key: str, owner: User | None, title: str = "") -> Session:
    channel, chat_id = key.split(":")
    return Session.objects.create(
        key=key, channel=channel, chat_id=chat_id, owner=owner, title=title
    )


def test_lists_only_my_sessions_newest_first(api: APIClient, ada: User) -> None:
    bob = User.objects.create_user("bob")
    make_session("web:old", ada, "old")
    make_session("web:new", ada, "new")
    make_session("web:bobs", bob, "bob's")
    for path in ("/api/sessions", "/api/sessions/"):
        response = api.get(path)
        assert response.status_code == 200
        assert [s["key"] for s in response.json()] == ["web:new", "web:old"]


def test_rename_and_delete(api: APIClient, ada: User) -> None:
    make_session("web:x", ada, "before")
    response = api.patch("/api/sessions/web:x", {"title": "after"}, format="json")
    assert response.status_code == 200 and response.json()["title"] == "after"
    assert api.delete("/api/sessions/web:x").status_code == 204
    assert not Session.objects.filter(key="web:x").exists()


def test_rename_validates_the_title(api: APIClient, ada: User) -> None:
    make_session("web:v", ada)
    response = api.patch("/api/sessions/web:v", {"title": "x" * 201}, format="json")
    assert response.status_code == 400 and "title" in response.json()


def test_another_users_session_is_a_404(api: APIClient) -> None:
    bob = User.objects.create_user("bob")
    make_session("web:b", bob, "private")
    assert api.get("/api/sessions/web:b").status_code == 404
    assert api.patch("/api/sessions/web:b", {"title": "mine"}, format="json").status_code == 404
    assert api.delete("/api/sessions/web:b").status_code == 404
    assert api.get("/api/sessions/web:b/messages").status_code == 404
    assert Session.objects.get(key="web:b").title == "private"


def test_messages_in_order(api: APIClient, ada: User) -> None:
    session = make_session("web:m", ada)
    for role, content in [("user", "q"), ("assistant", "a")]:
        Message.objects.create(session=session, role=role, content=content)
    response = api.get("/api/sessions/web:m/messages")
    assert [(m["role"], m["content"]) for m in response.json()] == [
        ("user", "q"),
        ("assistant", "a"),
    ]


def test_anonymous_is_refused() -> None:
    assert APIClient().get("/api/sessions").status_code in (401, 403)


def test_chat_page_needs_a_login(client, ada: User) -> None:
    response = client.get("/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    client.force_login(ada)
    page = client.get("/c/abc123/")
    assert page.status_code == 200
    assert b'data-chat-id="abc123"' in page.content
    assert client.get("/c/bad%20id/").status_code == 404
