"""Bodies no field could hold, sent to every endpoint that reads JSON: each is a JSON 400
that names what was wrong without repeating it, never a 500."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("agent_settings")]

LONE = "\ud800"
DEEP = "[" * 100_000 + "]" * 100_000

TASK = {
    "prompt": "hi",
    "context": "about",
    "session": "api:x",
    "model": "openai/scripted",
    "wait": False,
}
CRON_JOB = {
    "name": "daily",
    "message": "Hi",
    "session": "api:x",
    "kind": "cron",
    "cron_expr": "0 9 * * *",
    "tz": "UTC",
}
MEMORY = {"session": "api:x", "content": "Ada likes trains."}
SKILL = {"name": "weather", "description": "Forecasts.", "content": "# Weather"}
MCP_SERVER = {
    "name": "files",
    "transport": "stdio",
    "command": "npx",
    "args": ["-y"],
    "env": {"REGION": "eu"},
}
HTTP_MCP_SERVER = {"name": "search", "transport": "http", "url": "https://mcp.example.com/mcp"}


@pytest.fixture
def staff() -> APIClient:
    """A staff user, so that the site-wide endpoints take writes too."""
    client = APIClient()
    client.force_authenticate(User.objects.create_user("root", is_staff=True))
    return client


@pytest.fixture
def existing(staff: APIClient) -> dict[str, Any]:
    """One of everything a PATCH can change, all the staff user's; the ids of the cron job
    and the memory, which the paths below name as {cron} and {memory}."""
    made = {}
    for path, body in (
        ("/api/tasks", {**TASK, "prompt": "/help", "wait": True}),
        ("/api/cron-jobs", CRON_JOB),
        ("/api/memory", MEMORY),
        ("/api/skills", SKILL),
        ("/api/mcp-servers", MCP_SERVER),
    ):
        response = staff.post(path, body, format="json")
        assert response.status_code in (200, 201), (path, response.content)
        made[path] = response.json()
    return {"cron": made["/api/cron-jobs"]["id"], "memory": made["/api/memory"]["id"]}


def send(client: APIClient, method: str, path: str, body: str) -> Any:
    return client.generic(method, path, body.encode(), content_type="application/json")


def assert_json_400(response: Any) -> dict[str, Any]:
    assert response.status_code == 400, response.content[:300]
    assert response["Content-Type"] == "application/json"
    body: dict[str, Any] = response.json()
    assert LONE not in json.dumps(body, ensure_ascii=False)
    return body


WRITES = [
    ("POST", "/api/tasks", "prompt"),
    ("POST", "/api/cron-jobs", "message"),
    ("PATCH", "/api/cron-jobs/{cron}", "name"),
    ("POST", "/api/memory", "content"),
    ("PATCH", "/api/memory/{memory}", "content"),
    ("POST", "/api/skills", "content"),
    ("PATCH", "/api/skills/weather", "content"),
    ("POST", "/api/mcp-servers", "args"),
    ("PATCH", "/api/mcp-servers/files", "args"),
    ("PATCH", "/api/sessions/api:x", "title"),
]


@pytest.mark.parametrize(("method", "path", "field"), WRITES)
@pytest.mark.parametrize("where", ["body", "field"])
def test_a_body_nested_past_the_recursion_limit_is_refused(
    staff: APIClient, existing: dict[str, Any], method: str, path: str, field: str, where: str
) -> None:
    body = DEEP if where == "body" else json.dumps({field: "x"}).replace('"x"', DEEP)
    response = send(staff, method, path.format(**existing), body)
    assert assert_json_400(response) == {
        "detail": "JSON parse error - the body is nested too deeply."
    }


def test_a_body_nested_just_short_of_the_limit_is_an_ordinary_400(
    staff: APIClient, existing: dict[str, Any]
) -> None:
    """What parses is walked without recursion, and no field takes such a value anyway."""
    for depth in (100, 500, 900):
        nested = "[" * depth + "]" * depth
        for method, path, field in WRITES:
            body = json.dumps({field: "x"}).replace('"x"', nested)
            response = send(staff, method, path.format(**existing), body)
            if response.status_code == 400:
                assert_json_400(response)
            else:  # only a JSON 400 from the parser when it is too deep for it
                assert response.status_code != 500, (path, depth)


def with_lone_surrogate(body: dict[str, Any], field: str) -> str:
    """`body` with `field` (`env.REGION`, `args.0`) set to a lone surrogate, written as
    JSON's `\\ud800` escape: that is how a client sends one."""
    changed = json.loads(json.dumps(body))
    name, _, inner = field.partition(".")
    if inner.isdigit():
        changed[name][int(inner)] = LONE
    elif inner:
        changed[name][inner] = LONE
    else:
        changed[name] = LONE
    return json.dumps(changed)


STRING_FIELDS = [
    ("/api/tasks", TASK, ["prompt", "context", "session", "model"]),
    ("/api/cron-jobs", CRON_JOB, ["name", "message", "session", "kind", "cron_expr", "tz"]),
    ("/api/memory", MEMORY, ["session", "content"]),
    ("/api/skills", SKILL, ["name", "description", "content"]),
    ("/api/mcp-servers", MCP_SERVER, ["name", "transport", "command", "args.0", "env.REGION"]),
    ("/api/mcp-servers", HTTP_MCP_SERVER, ["url"]),
]


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [(path, body, field) for path, body, fields in STRING_FIELDS for field in fields],
)
def test_a_lone_surrogate_in_any_string_field_is_refused(
    staff: APIClient, path: str, body: dict[str, Any], field: str
) -> None:
    response = send(staff, "POST", path, with_lone_surrogate(body, field))
    name = field.partition(".")[0]
    assert assert_json_400(response) == {
        name: ["This value contains an unpaired surrogate character."]
    }


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/cron-jobs/{cron}", {"kind": LONE}),
        ("/api/memory/{memory}", {"content": LONE}),
        ("/api/skills/weather", {"description": LONE}),
        ("/api/mcp-servers/files", {"env": {"REGION": LONE}}),
        ("/api/sessions/api:x", {"title": LONE}),
    ],
)
def test_a_lone_surrogate_in_a_change_is_refused(
    staff: APIClient, existing: dict[str, Any], path: str, body: dict[str, Any]
) -> None:
    response = send(staff, "PATCH", path.format(**existing), json.dumps(body))
    assert assert_json_400(response) == {
        next(iter(body)): ["This value contains an unpaired surrogate character."]
    }


def test_a_lone_surrogate_in_a_field_name_or_a_bare_body_is_refused(staff: APIClient) -> None:
    named = send(staff, "POST", "/api/memory", json.dumps({LONE: "x", "content": "y"}))
    assert assert_json_400(named) == {
        "detail": "JSON parse error - a field name contains an unpaired surrogate character."
    }
    bare = send(staff, "POST", "/api/memory", json.dumps([LONE]))
    assert assert_json_400(bare) == {
        "detail": "JSON parse error - the body contains an unpaired surrogate character."
    }
