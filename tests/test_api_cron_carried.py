"""What a cron job carries from the agent's turn that scheduled it (`tools`,
`approve_tools`): the API shows it and refuses to change it, a job made through the API
carries nothing, staff change it in the admin, and a run's page shows what it carried."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from cron_app import services
from cron_app.models import CronJob

pytestmark = pytest.mark.django_db


@pytest.fixture
def carried_job(ada: User) -> CronJob:
    """A job as a turn limited to some tools, in a chat where exec waits, scheduled it."""
    return services.create_job(
        owner=ada,
        message="Read the log",
        session="web:log",
        kind="every",
        every_seconds=3600,
        tools=["cron", "read_file"],
        approve_tools=["exec"],
    )


def test_the_api_shows_what_a_job_carries_and_keeps_it(
    api: APIClient, carried_job: CronJob
) -> None:
    path = f"/api/cron-jobs/{carried_job.pk}"
    shown = api.get(path).json()
    assert shown["tools"] == ["cron", "read_file"] and shown["approve_tools"] == ["exec"]

    for change in (
        {"tools": None},
        {"tools": ["cron", "read_file", "exec"]},
        {"approve_tools": []},
    ):
        response = api.patch(path, {"name": "wider", **change}, format="json")
        assert response.status_code == 400, response.json()
        (field,) = change
        assert "This field is read-only" in response.json()[field][0]
    carried_job.refresh_from_db()
    assert carried_job.name == "Read the log"
    assert (carried_job.tools, carried_job.approve_tools) == (["cron", "read_file"], ["exec"])

    # A job read and put back whole, the same limits with it, is changed as asked.
    shown["message"] = "Read the log twice"
    response = api.put(path, shown, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["tools"] == ["cron", "read_file"]
    assert CronJob.objects.get(pk=carried_job.pk).message == "Read the log twice"


def test_a_job_made_through_the_api_carries_nothing(api: APIClient) -> None:
    job = {"message": "m", "session": "web:a", "kind": "every", "every_seconds": 60}
    refused = api.post("/api/cron-jobs", {**job, "tools": ["read_file"]}, format="json")
    assert refused.status_code == 400 and "tools" in refused.json()
    assert not CronJob.objects.exists()

    made = api.post("/api/cron-jobs", {**job, "approve_tools": []}, format="json")
    assert made.status_code == 201, made.json()
    assert (made.json()["tools"], made.json()["approve_tools"]) == (None, [])
    schema = api.get("/api/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    out = schema["components"]["schemas"]["CronJobOut"]["properties"]
    assert out["tools"]["readOnly"] and out["approve_tools"]["readOnly"]
    assert "tools" not in schema["components"]["schemas"]["CronJobInRequest"]["properties"]


def test_staff_change_what_a_job_carries_in_the_admin(
    admin_client: Client, carried_job: CronJob
) -> None:
    url = reverse("admin:cron_app_cronjob_change", args=[carried_job.pk])
    page = admin_client.get(url).content.decode()
    assert "Carried from the turn that scheduled it" in page
    data = {
        "owner": str(carried_job.owner_id),
        "name": carried_job.name,
        "message": carried_job.message,
        "session": carried_job.session,
        "enabled": "on",
        "kind": "every",
        "every_seconds": "3600",
        "cron_expr": "",
        "tz": "UTC",
        "at_0": "",
        "at_1": "",
        "tools": "",
        "approve_tools": '["exec", "mcp_*"]',
    }
    response = admin_client.post(url, data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    carried_job.refresh_from_db()
    assert carried_job.tools is None and carried_job.approve_tools == ["exec", "mcp_*"]

    data["tools"] = '["read file"]'
    response = admin_client.post(url, data)
    assert response.status_code == 200
    assert "is not a tool name" in str(response.context["adminform"].form.errors["tools"])


def test_a_run_shows_what_it_carried_in_the_admin(admin_client: Client, ada: User) -> None:
    from sessions_app import runs as run_records
    from sessions_app import services as session_services

    session = session_services.get_or_create_session(key="subagent:x", owner=ada)
    run = run_records.queue_run(
        session=session, channel="subagent", prompt="p", model="m", approve_tools=["exec"]
    )
    page = admin_client.get(reverse("admin:sessions_app_run_change", args=[run.pk]))
    assert page.status_code == 200
    assert "Approve tools" in page.content.decode() and "exec" in page.content.decode()
