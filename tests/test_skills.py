"""Skills: kept in the database (admin, `/api/skills`) or as workspace files, offered in the
system prompt, and read in full with `read_skill`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agent.turn import run_turn
from sessions_app.models import Message
from skills_app.models import Skill
from tests.llm_server import ScriptedLLM

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]

WEATHER = {
    "name": "weather",
    "description": "Current weather for a place.",
    "content": "Call `curl wttr.in/<place>?format=3`.",
}


@pytest.fixture
def staff() -> APIClient:
    client = APIClient()
    client.force_authenticate(User.objects.create_user("root", is_staff=True))
    return client


def write_skill(workspace: Path, folder: str, text: str) -> None:
    (workspace / "skills" / folder).mkdir(parents=True, exist_ok=True)
    (workspace / "skills" / folder / "SKILL.md").write_text(text)


def system_prompt(llm: ScriptedLLM) -> str:
    return str(llm.requests[-1]["messages"][0]["content"])


def test_staff_keep_skills_through_the_api(staff: APIClient) -> None:
    created = staff.post("/api/skills", WEATHER, format="json")
    assert created.status_code == 201
    assert created.json()["always"] is False and created.json()["enabled"] is True

    assert staff.get("/api/skills/weather").json()["content"] == WEATHER["content"]
    changed = staff.patch("/api/skills/weather", {"always": True}, format="json")
    assert changed.status_code == 200 and changed.json()["always"] is True
    assert [s["name"] for s in staff.get("/api/skills").json()] == ["weather"]

    assert staff.post("/api/skills", WEATHER, format="json").status_code == 400  # taken
    bad = staff.post("/api/skills", {**WEATHER, "name": "no spaces"}, format="json")
    assert bad.status_code == 400 and "name" in bad.json()

    assert staff.delete("/api/skills/weather").status_code == 204
    assert staff.get("/api/skills/weather").status_code == 404


def test_other_users_read_skills_but_cannot_change_them(api: APIClient, staff: APIClient) -> None:
    staff.post("/api/skills", WEATHER, format="json")
    assert [s["name"] for s in api.get("/api/skills").json()] == ["weather"]
    assert api.post("/api/skills", {**WEATHER, "name": "mine"}, format="json").status_code == 403
    assert api.patch("/api/skills/weather", {"content": "x"}, format="json").status_code == 403
    assert api.delete("/api/skills/weather").status_code == 403
    assert APIClient().get("/api/skills").status_code == 401
    assert Skill.objects.get().content == WEATHER["content"]


def test_the_admin_lists_skills(client: Any, staff: APIClient) -> None:
    staff.post("/api/skills", WEATHER, format="json")
    client.force_login(User.objects.create_superuser("boss", password="pw-boss-123"))
    page = client.get("/admin/skills_app/skill/")
    assert page.status_code == 200 and b"weather" in page.content


async def test_skills_are_offered_in_the_system_prompt(llm: ScriptedLLM, workspace: Path) -> None:
    await sync_to_async(Skill.objects.create)(
        name="style", description="House style.", content="Answer in haiku.", always=True
    )
    await sync_to_async(Skill.objects.create)(**WEATHER)
    write_skill(workspace, "pdf", "---\nname: pdf\ndescription: Read PDF files.\n---\nUse it.")
    write_skill(
        workspace,
        "scan",
        "---\nname: scan\ndescription: Scan things.\nrequires:\n  bins: [no-such-program-xyz]\n"
        "  env: [SCAN_TOKEN]\n---\nScan.",
    )
    # A file of the database's name loses to the database.
    write_skill(workspace, "weather", "---\nname: weather\ndescription: Old weather.\n---\nOld.")
    llm.reply("ok")

    await run_turn("cli:direct", "hello", channel="cli")

    prompt = system_prompt(llm)
    assert "## Skill: style\n\nAnswer in haiku." in prompt  # always: in full
    assert "- weather: Current weather for a place." in prompt
    assert "Old weather" not in prompt
    assert "- pdf: Read PDF files." in prompt and "Use it." not in prompt
    assert "- scan (unavailable: needs program no-such-program-xyz, variable SCAN_TOKEN)" in prompt


async def test_a_disabled_skill_is_not_offered(llm: ScriptedLLM, workspace: Path) -> None:
    await sync_to_async(Skill.objects.create)(**WEATHER, enabled=False)
    write_skill(workspace, "weather", "---\ndescription: From a file.\n---\nFile.")
    llm.reply("ok")
    await run_turn("cli:direct", "hello", channel="cli")
    assert "## Skills" not in system_prompt(llm)


async def test_the_model_reads_a_skill_in_full(llm: ScriptedLLM, workspace: Path) -> None:
    await sync_to_async(Skill.objects.create)(**WEATHER)
    write_skill(workspace, "pdf", "---\ndescription: Read PDF files.\n---\nRun pdftotext.")
    llm.tool_call("read_skill", {"name": "weather"})
    llm.tool_call("read_skill", {"name": "pdf"})
    llm.tool_call("read_skill", {"name": "nope"})
    llm.reply("done")

    assert (await run_turn("cli:direct", "weather?", channel="cli")).success

    results = await sync_to_async(
        lambda: [m.content for m in Message.objects.filter(role="tool").order_by("id")]
    )()
    assert results[0] == WEATHER["content"]
    assert results[1] == "Run pdftotext."
    assert results[2] == "Error: no skill is called 'nope'. Skills: pdf, weather"
    assert "read_skill" in json.dumps(llm.requests[0]["tools"])


def test_a_skill_made_through_the_api_names_the_tools_that_wait(staff: APIClient) -> None:
    created = staff.post(
        "/api/skills", {**WEATHER, "approve_tools": ["exec", "mcp_*"]}, format="json"
    )
    assert created.status_code == 201, created.json()
    assert staff.get("/api/skills/weather").json()["approve_tools"] == ["exec", "mcp_*"]
    for bad in ({"not": "a list"}, ["no spaces here"], [""]):
        refused = staff.post(
            "/api/skills", {**WEATHER, "name": "other", "approve_tools": bad}, format="json"
        )
        assert refused.status_code == 400 and "approve_tools" in refused.json(), refused.json()
