"""Tools that wait for a person in the admin: the runs that wait are listed and show their
calls; what a session, a user and a skill add to the tools that wait is edited there."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from sessions_app import runs as run_records
from sessions_app import services
from sessions_app.models import Approval, Run, Session, UserPreferences
from skills_app.models import Skill

pytestmark = pytest.mark.django_db


def waiting_run(owner: User) -> Run:
    session = services.get_or_create_session(key="web:waits", owner=owner)
    run = run_records.start_new_run(session=session, channel="web", prompt="deploy", model="m")
    Run.objects.filter(pk=run.pk).update(status=Run.Status.WAITING)
    Approval.objects.create(
        run=run,
        call_id="call_77",
        name="exec",
        arguments={"command": "make deploy"},
        deadline=timezone.now() + timedelta(minutes=10),
    )
    return run


def test_the_runs_that_wait_are_listed_with_their_calls(admin_client: Client, ada: User) -> None:
    run = waiting_run(ada)
    session = services.get_or_create_session(key="web:done", owner=ada)
    run_records.start_new_run(session=session, channel="web", prompt="other", model="m")

    listed = admin_client.get(
        reverse("admin:sessions_app_run_changelist"), {"status__exact": "waiting"}
    )
    assert listed.status_code == 200
    assert listed.context["cl"].result_count == 1
    assert "web:waits" in listed.content.decode()

    page = admin_client.get(reverse("admin:sessions_app_run_change", args=[run.pk]))
    assert page.status_code == 200
    text = page.content.decode()
    assert "call_77" in text and "make deploy" in text and "pending" in text

    calls = admin_client.get(
        reverse("admin:sessions_app_approval_changelist"), {"status__exact": "pending"}
    )
    assert calls.status_code == 200 and calls.context["cl"].result_count == 1


def test_a_session_a_user_and_a_skill_add_tools_that_wait(admin_client: Client, ada: User) -> None:
    session = services.get_or_create_session(key="web:mine", owner=ada)
    url = reverse("admin:sessions_app_session_change", args=[session.pk])
    form = admin_client.get(url).context["adminform"].form
    data = {name: form[name].value() or "" for name in form.fields}
    data.update({"owner": str(ada.pk), "approve_tools": '["exec", "mcp_*"]', "allowed_tools": "[]"})
    answer = admin_client.post(url, data)
    assert answer.status_code == 302, answer.context["adminform"].form.errors
    assert Session.objects.get(pk=session.pk).approve_tools == ["exec", "mcp_*"]
    data["approve_tools"] = '["not a tool"]'
    refused = admin_client.post(url, data)
    assert (
        refused.status_code == 200 and "approve_tools" in refused.context["adminform"].form.errors
    )

    added = admin_client.post(
        reverse("admin:sessions_app_userpreferences_add"),
        {"user": str(ada.pk), "approve_tools": '["web_fetch"]'},
    )
    assert added.status_code == 302
    assert UserPreferences.objects.get(user=ada).approve_tools == ["web_fetch"]

    added = admin_client.post(
        reverse("admin:skills_app_skill_add"),
        {
            "name": "deploys",
            "description": "How to deploy.",
            "content": "Run make deploy.",
            "enabled": "on",
            "approve_tools": '["exec"]',
        },
    )
    assert added.status_code == 302
    assert Skill.objects.get(name="deploys").approve_tools == ["exec"]
