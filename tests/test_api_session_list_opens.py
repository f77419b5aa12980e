"""Every session `GET /api/sessions` lists opens through the session routes."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from sessions_app import services
from sessions_app.models import Message

pytestmark = pytest.mark.django_db


def test_every_listed_session_opens(api: APIClient, ada: User) -> None:
    # As the chat page, the task API, the command line, the heartbeat and a scheduled job
    # make them, each with a message.
    for key in ("web:chat", "api:task", "cli:direct", "heartbeat", "cron:7", "subagent:s1"):
        session = services.get_or_create_session(key=key, owner=ada)
        Message.objects.create(session=session, role="user", content=f"in {key}")

    listed = [session["key"] for session in api.get("/api/sessions").json()]
    assert sorted(listed) == ["api:task", "web:chat"]
    for key in listed:
        opened = api.get(f"/api/sessions/{key}/messages")
        assert opened.status_code == 200, key
        assert [m["content"] for m in opened.json()] == [f"in {key}"]
        assert api.get(f"/api/sessions/{key}").status_code == 200


def test_a_key_made_before_the_rule_is_not_listed(api: APIClient, ada: User) -> None:
    for key in ("web:ok", "web:with space", "api:.."):
        services.get_or_create_session(key=key, owner=ada)
    assert [session["key"] for session in api.get("/api/sessions").json()] == ["web:ok"]
