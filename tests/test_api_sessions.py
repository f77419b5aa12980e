"""The sessions endpoints the chat page uses."""

from __future__ import annotations

import base64
from typing import Any

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
    assert "Link" not in response  # one page: nowhere else to go
    assert [m["archived"] for m in response.json()] == [False, False]


def make_messages(session: Session, count: int) -> list[int]:
    Message.objects.bulk_create(
        Message(session=session, role="user", content=f"m{n}") for n in range(count)
    )
    return list(session.messages.order_by("id").values_list("id", flat=True))


def ids(page: Any) -> list[int]:
    return [m["id"] for m in page.json()]


def links(page: Any) -> dict[str, str]:
    """The `Link` header's targets by relation: `{"prev": url, "next": url}`."""
    found = {}
    for part in page.get("Link", "").split(","):
        if part.strip():
            url, rel = part.split(";")
            found[rel.strip().removeprefix('rel="').removesuffix('"')] = url.strip()[1:-1]
    return found


def test_messages_open_at_the_latest_page_and_walk_back(api: APIClient, ada: User) -> None:
    every = make_messages(make_session("web:long", ada), 250)

    latest = api.get("/api/sessions/web:long/messages")
    assert ids(latest) == every[150:]  # the newest 100, newest last
    assert set(links(latest)) == {"prev"}

    middle = api.get(links(latest)["prev"])
    assert ids(middle) == every[50:150]
    oldest = api.get(links(middle)["prev"])
    assert ids(oldest) == every[:50]
    assert set(links(oldest)) == {"next"}

    assert ids(api.get(links(oldest)["next"])) == every[50:150]
    assert ids(api.get(links(middle)["next"])) == every[150:]


def test_messages_written_while_paging_back_do_not_shift_the_pages(
    api: APIClient, ada: User
) -> None:
    session = make_session("web:busy", ada)
    every = make_messages(session, 5)
    latest = api.get("/api/sessions/web:busy/messages?page_size=2")
    make_messages(session, 3)
    assert ids(api.get(links(latest)["prev"])) == every[1:3]


def test_page_size_is_a_parameter_with_a_cap(api: APIClient, ada: User) -> None:
    every = make_messages(make_session("web:big", ada), 600)
    small = api.get("/api/sessions/web:big/messages", {"page_size": 3})
    assert ids(small) == every[-3:]
    assert "page_size=3" in links(small)["prev"]
    capped = api.get("/api/sessions/web:big/messages", {"page_size": 10_000})
    assert ids(capped) == every[-500:]
    for unusable in ("0", "-1", "many"):
        page = api.get("/api/sessions/web:big/messages", {"page_size": unusable})
        assert ids(page) == every[-100:]


@pytest.mark.parametrize("position", [None, b"abc", b"%C2%B2", b"9" * 30])
def test_a_bad_cursor_is_a_json_404(api: APIClient, ada: User, position: bytes | None) -> None:
    cursor = "junk" if position is None else base64.b64encode(b"p=" + position).decode()
    make_messages(make_session("web:c", ada), 3)
    response = api.get("/api/sessions/web:c/messages", {"cursor": cursor})
    assert response.status_code == 404 and response["Content-Type"] == "application/json"


def test_archived_messages_are_listed_marked_and_can_be_filtered(api: APIClient, ada: User) -> None:
    session = make_session("web:a", ada)
    every = make_messages(session, 4)
    Message.objects.filter(id__in=every[:2]).update(archived=True)
    url = "/api/sessions/web:a/messages"
    page = api.get(url).json()
    assert [(m["id"], m["archived"]) for m in page] == [
        (every[0], True),
        (every[1], True),
        (every[2], False),
        (every[3], False),
    ]
    assert ids(api.get(url, {"archived": "false"})) == every[2:]
    assert ids(api.get(url, {"archived": "true"})) == every[:2]
    bad = api.get(url, {"archived": "sometimes"})
    assert bad.status_code == 400 and "archived" in bad.json()


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
