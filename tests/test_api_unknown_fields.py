"""A body field an endpoint of `/api/` does not take is a 400 naming it, at every endpoint
that reads a body, and nothing is changed, made or run. An object read with GET may still
be sent back whole: its read-only fields pass as they read, and are a 400 otherwise."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from cron_app.models import CronJob
from mcp_app.models import McpServer
from sessions_app.models import Memory, Run, Session, UserPreferences
from skills_app.models import Skill
from tests.llm_server import ScriptedLLM

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("agent_settings")]

CRON_JOB = {"name": "daily", "message": "Hi", "session": "api:x", "kind": "every",
            "every_seconds": 3600}  # fmt: skip
MCP_SERVER = {"name": "files", "transport": "stdio", "command": "npx", "env": {"K": "v"}}
SKILL = {"name": "weather", "description": "Forecasts.", "content": "# Weather"}


@pytest.fixture
def staff() -> APIClient:
    """A staff user, whose writes the site-wide endpoints (skills, MCP servers) take."""
    client = APIClient()
    client.force_authenticate(User.objects.create_user("root", is_staff=True))
    return client


@pytest.fixture
def made(staff: APIClient) -> dict[str, Any]:
    """One of each object a body can change, and a finished task."""
    task = staff.post("/api/tasks", {"prompt": "/help", "session": "api:x"}, format="json")
    assert task.status_code == 200, task.content
    ids = {"task": task.json()["id"]}
    for path, body in (
        ("/api/cron-jobs", CRON_JOB),
        ("/api/memory", {"content": "Ada likes trains."}),
        ("/api/skills", SKILL),
        ("/api/mcp-servers", MCP_SERVER),
    ):
        answer = staff.post(path, body, format="json")
        assert answer.status_code == 201, (path, answer.content)
        ids[path] = answer.json()
    ids["cron"] = ids["/api/cron-jobs"]["id"]
    ids["memory"] = ids["/api/memory"]["id"]
    return ids


def state() -> list[Any]:
    """Everything the endpoints below could change or make."""
    return [
        list(Session.objects.values("key", "title", "model", "approve_tools").order_by("pk")),
        list(Run.objects.values_list("pk", "status").order_by("pk")),
        list(CronJob.objects.values("name", "message", "every_seconds", "enabled").order_by("pk")),
        list(Memory.objects.values_list("content", flat=True).order_by("pk")),
        list(Skill.objects.values("name", "content", "enabled").order_by("pk")),
        list(McpServer.objects.values("name", "command", "enabled", "env").order_by("pk")),
        list(UserPreferences.objects.values_list("approve_tools", flat=True).order_by("pk")),
    ]


# (method, path, a body the endpoint takes): `{cron}`, `{memory}` and `{task}` are filled in.
BODIES: list[tuple[str, str, dict[str, Any]]] = [
    ("post", "/api/tasks", {"prompt": "hi"}),
    ("post", "/api/tasks/{task}/approve", {"call_id": "c1", "allow": True}),
    ("patch", "/api/sessions/api:x", {"title": "renamed"}),
    ("post", "/api/cron-jobs", {**CRON_JOB, "name": "other"}),
    ("put", "/api/cron-jobs/{cron}", {**CRON_JOB, "message": "changed"}),
    ("patch", "/api/cron-jobs/{cron}", {"message": "changed"}),
    ("post", "/api/cron-jobs/{cron}/run", {}),
    ("post", "/api/memory", {"content": "More."}),
    ("put", "/api/memory/{memory}", {"content": "changed"}),
    ("patch", "/api/memory/{memory}", {"content": "changed"}),
    ("post", "/api/skills", {**SKILL, "name": "other"}),
    ("put", "/api/skills/weather", {**SKILL, "content": "changed"}),
    ("patch", "/api/skills/weather", {"content": "changed"}),
    ("post", "/api/mcp-servers", {**MCP_SERVER, "name": "other"}),
    ("put", "/api/mcp-servers/files", {**MCP_SERVER, "command": "changed"}),
    ("patch", "/api/mcp-servers/files", {"command": "changed"}),
    ("put", "/api/approvals", {"approve_tools": ["exec"]}),
    ("patch", "/api/approvals", {"approve_tools": ["exec"]}),
    ("post", "/api/tasks/{task}/cancel", {}),
]


@pytest.mark.parametrize(("method", "path", "body"), BODIES)
def test_an_unknown_field_is_a_400_naming_it_and_changes_nothing(
    staff: APIClient, made: dict[str, Any], llm: ScriptedLLM, method: str, path: str, body: dict
) -> None:
    before = state()
    asked = len(llm.requests)
    url = path.format(**made)

    answer = getattr(staff, method)(url, {**body, "modle": "x", "colour": 1}, format="json")

    assert answer.status_code == 400, answer.content
    errors = answer.json()
    assert set(errors) == {"modle", "colour"}, errors
    assert errors["modle"][0].startswith("Unknown field. The fields taken here are: ")
    assert state() == before
    assert len(llm.requests) == asked


def test_a_sessions_model_is_not_changed_by_a_patch(staff: APIClient, made: dict) -> None:
    before = state()
    answer = staff.patch("/api/sessions/api:x", {"model": "openai/other"}, format="json")

    assert answer.status_code == 400
    assert list(answer.json()) == ["model"]
    assert answer.json()["model"][0].startswith("This field is read-only")
    assert state() == before


def test_an_uploads_unknown_form_field_is_a_400(staff: APIClient) -> None:
    upload = SimpleUploadedFile("notes.txt", b"hello")
    answer = staff.post("/api/uploads", {"file": upload, "path": "../elsewhere"})

    assert answer.status_code == 400, answer.content
    assert list(answer.json()) == ["path"]
    assert staff.get("/api/uploads").json() == []


@pytest.mark.parametrize("path", ["/api/cron-jobs/{cron}", "/api/memory/{memory}",
                                  "/api/skills/weather", "/api/mcp-servers/files",
                                  "/api/sessions/api:x"])  # fmt: skip
def test_an_object_read_and_sent_back_whole_is_taken(
    staff: APIClient, made: dict[str, Any], path: str
) -> None:
    url = path.format(**made)
    read = staff.get(url).json()
    before = state()

    assert staff.patch(url, read, format="json").status_code == 200
    if not path.startswith("/api/sessions"):  # sessions take no PUT
        assert staff.put(url, staff.get(url).json(), format="json").status_code == 200
    assert state() == before


def test_a_read_only_field_sent_with_another_value_is_a_400(
    staff: APIClient, made: dict[str, Any]
) -> None:
    url = f"/api/cron-jobs/{made['cron']}"
    read = staff.get(url).json()

    answer = staff.put(url, {**read, "next_run": "2000-01-01T00:00:00Z"}, format="json")

    assert answer.status_code == 400
    [reason] = answer.json()["next_run"]
    assert reason.startswith("This field is read-only: it cannot be changed here (it reads ")
    assert read["next_run"] in reason


# The request bodies of the endpoints above, as the schema names them.
REQUEST_SCHEMAS = {
    "TaskInRequest", "ApproveInRequest", "PatchedSessionUpdateInRequest", "CronJobInRequest",
    "PatchedCronJobInRequest", "MemoryInRequest", "MemoryUpdateInRequest",
    "PatchedMemoryUpdateInRequest", "SkillInRequest", "PatchedSkillInRequest",
    "McpServerInRequest", "PatchedMcpServerInRequest", "UploadInRequest",
}  # fmt: skip


def test_the_schema_says_no_other_fields(staff: APIClient) -> None:
    schema = staff.get("/api/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    components = schema["components"]["schemas"]
    assert {name: components[name].get("additionalProperties") for name in REQUEST_SCHEMAS} == {
        name: False for name in REQUEST_SCHEMAS
    }
