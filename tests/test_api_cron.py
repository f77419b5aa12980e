"""`/api/cron-jobs`: a user's scheduled jobs, their validation, and the django-q2 schedule
that follows each one."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.module_loading import import_string
from rest_framework.test import APIClient

from agent import jobs
from cron_app import services
from cron_app.models import CronJob

pytestmark = pytest.mark.django_db

EVERY = {"message": "Any news?", "session": "web:news", "kind": "every", "every_seconds": 3600}


def planned(job_id: int) -> Any:
    """The job's next run as saved: what the dispatchers keep to."""
    return CronJob.objects.get(pk=job_id).next_run


def when(text: str | None) -> datetime | None:
    return parse_datetime(text) if text else None


def in_an_hour() -> str:
    return (timezone.now() + timedelta(hours=1)).isoformat()


def json_client(user: User | None = None) -> APIClient:
    client = APIClient()
    client.default_format = "json"  # the API parses JSON only
    if user is not None:
        client.force_authenticate(user)
    return client


@pytest.fixture(autouse=True)
def _json(api: APIClient) -> None:
    api.default_format = "json"


@pytest.fixture
def bob() -> APIClient:
    return json_client(User.objects.create_user("bob"))


@pytest.mark.parametrize(
    "fields",
    [
        {"kind": "every", "every_seconds": 60},
        {"kind": "cron", "cron_expr": "0 9 * * 1-5", "tz": "Europe/Paris"},
        {"kind": "at", "at": "2999-01-01T08:00:00+01:00"},
    ],
    ids=["every", "cron", "at"],
)
def test_creates_each_kind_planned(api: APIClient, fields: dict[str, Any]) -> None:
    before = timezone.now()
    response = api.post("/api/cron-jobs", {"message": "Hi", "session": "api:x", **fields})
    assert response.status_code == 201, response.json()
    body = response.json()
    assert {k: body[k] for k in fields if k != "at"} == {
        k: v for k, v in fields.items() if k != "at"
    }
    assert body["name"] == "Hi" and body["enabled"] is True  # a name from the message
    assert body["last_run"] is None and body["last_status"] == ""
    next_run = when(body["next_run"])
    assert next_run is not None and next_run > before
    job = CronJob.objects.get(pk=body["id"])
    assert job.owner is not None and job.owner.username == "ada"
    assert job.next_run == next_run
    if fields["kind"] == "at":
        assert next_run == when(fields["at"])
    if fields["kind"] == "cron":
        assert next_run.minute == 0


def test_an_at_without_an_offset_is_read_in_the_jobs_zone(api: APIClient) -> None:
    fields = {"kind": "at", "at": "2999-06-01T09:00:00", "tz": "Asia/Tokyo"}
    body = api.post("/api/cron-jobs", {**EVERY, **fields}).json()
    assert when(body["at"]) == when("2999-06-01T00:00:00+00:00")


def test_lists_only_my_jobs_newest_first(api: APIClient, ada: User, bob: APIClient) -> None:
    first = api.post("/api/cron-jobs", {**EVERY, "name": "first"}).json()
    second = api.post("/api/cron-jobs", {**EVERY, "name": "second"}).json()
    bobs = bob.post("/api/cron-jobs", {**EVERY, "name": "bob's"}).json()
    for path in ("/api/cron-jobs", "/api/cron-jobs/"):
        response = api.get(path)
        assert response.status_code == 200
        assert [j["id"] for j in response.json()] == [second["id"], first["id"]]
    assert [j["id"] for j in bob.get("/api/cron-jobs").json()] == [bobs["id"]]
    assert api.get(f"/api/cron-jobs/{first['id']}/").json() == first


def test_a_list_comes_a_page_at_a_time(api: APIClient) -> None:
    for n in range(3):
        api.post("/api/cron-jobs", {**EVERY, "name": f"job {n}"})
    first = api.get("/api/cron-jobs", {"page_size": 2})
    assert [j["name"] for j in first.json()] == ["job 2", "job 1"]
    assert 'rel="next"' in first["Link"]
    older = first["Link"].split(";")[0].strip("<>")
    assert [j["name"] for j in api.get(older).json()] == ["job 0"]


def test_another_users_job_is_a_404(api: APIClient, bob: APIClient) -> None:
    job = bob.post("/api/cron-jobs", EVERY).json()
    path = f"/api/cron-jobs/{job['id']}"
    assert api.get(path).status_code == 404
    assert api.patch(path, {"enabled": False}).status_code == 404
    assert api.put(path, {**EVERY, "name": "mine"}).status_code == 404
    assert api.post(f"{path}/run").status_code == 404
    assert api.delete(path).status_code == 404
    assert bob.get(path).json() == job
    assert planned(job["id"]) is not None


def test_a_change_of_timing_plans_the_job_afresh(api: APIClient) -> None:
    job = api.post("/api/cron-jobs", EVERY).json()
    path = f"/api/cron-jobs/{job['id']}"
    renamed = api.patch(path, {"name": "renamed"}).json()
    assert renamed["name"] == "renamed" and renamed["next_run"] == job["next_run"]
    # Sent back as read: nothing changed, so the next run stays where it was.
    assert api.put(path, renamed).json()["next_run"] == job["next_run"]

    sooner = api.patch(path, {"every_seconds": 60}).json()
    next_run = when(sooner["next_run"])
    assert next_run is not None and next_run < when(job["next_run"])  # type: ignore[operator]
    assert planned(job["id"]) == next_run

    daily = api.patch(path, {"kind": "cron", "cron_expr": "30 6 * * *", "tz": "UTC"}).json()
    next_run = when(daily["next_run"])
    assert next_run is not None and (next_run.hour, next_run.minute) == (6, 30)
    assert planned(job["id"]) == next_run


def test_disabling_drops_the_plan_and_enabling_brings_it_back(api: APIClient) -> None:
    job = api.post("/api/cron-jobs", EVERY).json()
    path = f"/api/cron-jobs/{job['id']}"
    off = api.patch(path, {"enabled": False}).json()
    assert off["enabled"] is False and off["next_run"] is None
    assert planned(job["id"]) is None

    on = api.patch(path, {"enabled": True}).json()
    assert on["enabled"] is True
    assert planned(job["id"]) == when(on["next_run"]) is not None


def test_delete_removes_the_job(api: APIClient) -> None:
    job = api.post("/api/cron-jobs", EVERY).json()
    assert api.delete(f"/api/cron-jobs/{job['id']}").status_code == 204
    assert not CronJob.objects.filter(pk=job["id"]).exists()
    assert api.get(f"/api/cron-jobs/{job['id']}").status_code == 404


@pytest.mark.parametrize(
    ("fields", "field", "reason"),
    [
        ({"tz": "Mars/Olympus_Mons", "kind": "cron", "cron_expr": "0 9 * * *"}, "tz", "unknown"),
        ({"kind": "cron", "cron_expr": "every morning"}, "cron_expr", "five fields"),
        ({"kind": "cron", "cron_expr": "0 0 31 2 *"}, "cron_expr", "matches no date"),
        ({"kind": "cron", "cron_expr": ""}, "cron_expr", "needs cron_expr"),
        ({"every_seconds": 5}, "every_seconds", "30"),
        ({"every_seconds": None}, "every_seconds", "at least 30"),
        ({"kind": "at", "at": None}, "at", "needs the time"),
        ({"kind": "at", "at": "2001-01-01T00:00:00Z"}, "at", "in the past"),
        ({"kind": "at", "at": "2999-01-01T00:00:00", "tz": "Nowhere/Town"}, "tz", "unknown"),
        ({"kind": "hourly"}, "kind", "valid choice"),
        ({"session": "cli:direct"}, "session", "does not match"),
        ({"session": "web:.."}, "session", "does not match"),
        ({"message": " "}, "message", "empty"),
        ({"message": 42}, "message", "valid string"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(
    api: APIClient, fields: dict[str, Any], field: str, reason: str
) -> None:
    response = api.post("/api/cron-jobs", {**EVERY, **fields})
    assert response.status_code == 400
    assert reason in " ".join(response.json()[field])
    assert not CronJob.objects.exists()


def test_a_bad_change_is_a_400_and_changes_nothing(api: APIClient) -> None:
    job = api.post("/api/cron-jobs", EVERY).json()
    path = f"/api/cron-jobs/{job['id']}"
    for fields, field in [
        ({"kind": "cron"}, "cron_expr"),  # needs an expression it does not have
        ({"tz": "Atlantis"}, "tz"),
        ({"name": ""}, "name"),
        ({"kind": "at", "at": "2001-01-01T00:00:00Z"}, "at"),
    ]:
        response = api.patch(path, fields)
        assert response.status_code == 400 and field in response.json(), fields
    assert api.get(path).json() == job
    assert api.put(path, {"name": "no message"}).json().keys() >= {"message", "session", "kind"}


def test_a_one_off_job_that_ran_cannot_be_enabled_for_the_past(api: APIClient, ada: User) -> None:
    soon = timezone.now() + timedelta(hours=1)
    job = services.create_job(owner=ada, message="m", session="web:s", kind="at", at=soon)
    CronJob.objects.filter(pk=job.pk).update(
        enabled=False, next_run=None, at=timezone.now() - timedelta(days=1)
    )
    response = api.patch(f"/api/cron-jobs/{job.pk}", {"enabled": True})
    assert response.status_code == 400 and "past" in response.json()["at"][0]
    later = api.patch(f"/api/cron-jobs/{job.pk}", {"enabled": True, "at": in_an_hour()}).json()
    assert later["enabled"] is True and planned(job.pk) is not None


def test_run_now_queues_the_worker_task(
    api: APIClient, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    queued: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
    monkeypatch.setattr(
        "django_q.tasks.async_task", lambda func, *a, **kw: queued.append((func, a, kw))
    )
    job = api.post("/api/cron-jobs", {**EVERY, "enabled": False}).json()
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(f"/api/cron-jobs/{job['id']}/run")
    assert response.status_code == 202 and response.json() == job
    assert [(func, args, kw["scheduled"]) for func, args, kw in queued] == [
        (jobs.RUN_CRON_JOB, (job["id"],), False)
    ]
    assert callable(import_string(jobs.RUN_CRON_JOB))  # what the worker will be told to run exists
    assert planned(job["id"]) is None  # a disabled job stays unplanned


def test_anonymous_clients_reach_no_cron_job(api: APIClient) -> None:
    job = api.post("/api/cron-jobs", EVERY).json()
    anonymous = json_client()
    path = f"/api/cron-jobs/{job['id']}"
    for method, url in [
        ("get", "/api/cron-jobs"),
        ("post", "/api/cron-jobs"),
        ("get", path),
        ("patch", path),
        ("put", path),
        ("delete", path),
        ("post", f"{path}/run"),
    ]:
        response = getattr(anonymous, method)(url, EVERY)
        assert response.status_code in (401, 403), (method, url)
    assert api.get(path).json() == job


def test_the_schema_documents_the_cron_jobs(api: APIClient) -> None:
    schema = api.get("/api/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    paths = schema["paths"]
    assert set(paths["/api/cron-jobs"]) == {"get", "post"}
    assert set(paths["/api/cron-jobs/{job_id}"]) == {"get", "put", "patch", "delete"}
    assert "202" in paths["/api/cron-jobs/{job_id}/run"]["post"]["responses"]
    assert "/api/cron-jobs/" not in paths
    out = schema["components"]["schemas"]["CronJobOut"]["properties"]
    assert {"id", "name", "message", "session", "kind", "every_seconds", "cron_expr", "tz"} <= set(
        out
    )
    assert {"at", "enabled", "last_run", "last_status", "next_run"} <= set(out)
