"""A user's own prompt files in the API's details and in the admin: whose a skill of a name
is, what staff may remove, what the schema says, and the admin's page of each user's files
(the flows over real HTTP are in `test_prompt_files_live.py`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from rest_framework.test import APIClient

from agent.context import BOOTSTRAP_FILE_LIMIT, BOOTSTRAP_FILES
from agent.tools.guards.folders import make_user_folder
from skills_app.models import Skill

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("agent_settings")]

WEATHER = {"name": "weather", "description": "The operator's.", "content": "OPS-WEATHER"}


def own_skill(folder: Path, directory: str, text: str) -> Path:
    (folder / "skills" / directory).mkdir(parents=True, exist_ok=True)
    path = folder / "skills" / directory / "SKILL.md"
    path.write_text(text)
    return path


@pytest.fixture
def ada_folder(ada: User, workspace: Path) -> Path:
    return make_user_folder(workspace, "ada")


@pytest.fixture
def staff(db: None) -> User:
    return User.objects.create_user("root", password="pw-root-123", is_staff=True)


def client_of(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_a_users_skill_of_an_operators_name_is_listed_but_not_offered(
    api: APIClient, ada_folder: Path
) -> None:
    Skill.objects.create(**WEATHER)
    own_skill(ada_folder, "weather", "---\ndescription: Mine.\n---\nADA-WEATHER")

    listed = api.get("/api/skills").json()
    assert [(s["name"], s["source"], s["path"], s["offered"]) for s in listed] == [
        ("weather", "operator", None, True),
        ("weather", "yours", "skills/weather/SKILL.md", False),
    ]
    assert listed[1]["created"] is None and listed[1]["updated"]
    assert api.get("/api/skills/weather").json()["content"] == "OPS-WEATHER"
    assert api.get("/api/skills/weather?source=yours").json()["content"] == "ADA-WEATHER"

    refused = api.delete("/api/skills/weather")
    assert refused.status_code == 403
    assert "?source=yours" in refused.json()["detail"]
    assert api.delete("/api/skills/weather?source=yours").status_code == 204
    assert not (ada_folder / "skills" / "weather").exists()
    assert Skill.objects.filter(name="weather").exists()


def test_staff_remove_the_databases_skill_first_and_theirs_by_source(
    staff: User, workspace: Path
) -> None:
    Skill.objects.create(**WEATHER)
    folder = make_user_folder(workspace, "root")
    own_skill(folder, "weather", "---\ndescription: Mine.\n---\nROOT-WEATHER")
    client = client_of(staff)

    assert client.delete("/api/skills/weather").status_code == 204
    assert not Skill.objects.exists()
    assert (folder / "skills" / "weather" / "SKILL.md").exists()
    assert client.delete("/api/skills/weather?source=operator").status_code == 404
    assert client.delete("/api/skills/weather?source=yours").status_code == 204
    assert client.get("/api/skills").json() == []


def test_a_root_skill_file_is_read_only_to_staff_too(staff: User, workspace: Path) -> None:
    own_skill(workspace, "pdf", "---\ndescription: Read PDFs.\n---\nOPS-PDF")
    client = client_of(staff)

    assert client.get("/api/skills/pdf").json()["path"] == "skills/pdf/SKILL.md"
    refused = client.delete("/api/skills/pdf")
    assert refused.status_code == 403 and "on the server" in refused.json()["detail"]
    assert client.patch("/api/skills/pdf", {"always": True}, format="json").status_code == 404
    assert (workspace / "skills" / "pdf" / "SKILL.md").exists()


def test_a_disabled_database_skill_keeps_the_files_of_its_name_off(
    api: APIClient, workspace: Path, ada_folder: Path
) -> None:
    Skill.objects.create(**WEATHER, enabled=False)
    own_skill(workspace, "weather", "---\ndescription: Root.\n---\nRoot.")
    own_skill(ada_folder, "weather", "---\ndescription: Mine.\n---\nMine.")
    own_skill(ada_folder, "notes", "---\ndescription: Notes.\n---\nNotes.")

    listed = api.get("/api/skills").json()
    assert [(s["name"], s["source"], s["offered"]) for s in listed] == [
        ("notes", "yours", True),
        ("weather", "operator", False),
        ("weather", "operator", False),
        ("weather", "yours", False),
    ]


def test_a_long_bootstrap_file_is_shown_as_far_as_the_prompt_takes_it(
    api: APIClient, ada_folder: Path
) -> None:
    (ada_folder / "USER.md").write_text("u" * (BOOTSTRAP_FILE_LIMIT + 10))
    (ada_folder / "AGENTS.md").write_text("mine")
    (ada_folder / "TOOLS.md").mkdir()  # a folder: not a prompt file, and not removed here

    files = api.get("/api/prompt-files").json()
    assert [(f["name"], f["size"], f["truncated"]) for f in files] == [
        ("AGENTS.md", 4, False),
        ("USER.md", BOOTSTRAP_FILE_LIMIT + 10, True),
    ]
    assert len(files[1]["text"]) == BOOTSTRAP_FILE_LIMIT
    assert api.delete("/api/prompt-files/TOOLS.md").status_code == 404
    assert (ada_folder / "TOOLS.md").is_dir()
    assert api.delete("/api/prompt-files/..").status_code == 404
    assert api.delete("/api/prompt-files/HEARTBEAT.md").status_code == 404


def test_without_a_folder_there_is_nothing_of_yours(api: APIClient, workspace: Path) -> None:
    assert api.get("/api/skills").json() == []
    assert api.get("/api/prompt-files").json() == []
    assert api.delete("/api/skills/x").status_code == 404
    assert api.delete("/api/prompt-files/AGENTS.md").status_code == 404
    assert not (workspace / "users").exists()


def test_a_folder_that_is_a_link_is_not_read(
    api: APIClient, workspace: Path, outside: Path
) -> None:
    (workspace / "users").mkdir()
    (outside / "AGENTS.md").write_text("elsewhere")
    own_skill(outside, "x", "---\ndescription: Elsewhere.\n---\nx")
    os.symlink(outside, workspace / "users" / "ada")

    assert api.get("/api/prompt-files").status_code == 409
    assert api.get("/api/skills").json() == []
    assert api.delete("/api/prompt-files/AGENTS.md").status_code == 409
    assert api.delete("/api/skills/x?source=yours").status_code == 409
    assert (outside / "AGENTS.md").exists() and (outside / "skills" / "x").exists()


def test_without_a_login_nothing(db: None) -> None:
    for url in ("/api/prompt-files", "/api/prompt-files/AGENTS.md"):
        assert APIClient().get(url).status_code == 401
        assert APIClient().delete(url).status_code == 401


def test_the_schema_documents_prompt_files_and_sources(api: APIClient) -> None:
    schema = api.get("/api/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    paths = schema["paths"]
    assert "200" in paths["/api/prompt-files"]["get"]["responses"]
    detail = paths["/api/prompt-files/{name}"]
    assert {"204", "404", "409"} <= set(detail["delete"]["responses"])
    names = next(p for p in detail["delete"]["parameters"] if p["name"] == "name")
    assert set(names["schema"]["enum"]) == set(BOOTSTRAP_FILES)
    delete = paths["/api/skills/{name}"]["delete"]
    assert {"204", "400", "403", "404"} <= set(delete["responses"])
    source = next(p for p in delete["parameters"] if p["name"] == "source")
    assert source["in"] == "query" and set(source["schema"]["enum"]) == {"operator", "yours"}
    item = schema["components"]["schemas"]["SkillOut"]["properties"]
    assert {"source", "path", "offered"} <= set(item)


# ---- the admin --------------------------------------------------------------------------


def page_of(user: User) -> str:
    return f"/admin/auth/user/{user.pk}/prompt-files/"


def test_staff_see_a_users_prompt_files_as_theirs_and_remove_them(
    client: Client, ada: User, ada_folder: Path, workspace: Path
) -> None:
    (workspace / "AGENTS.md").write_text("OPS-AGENTS")
    (ada_folder / "AGENTS.md").write_text("ADA-AGENTS")
    own_skill(ada_folder, "obey", "---\ndescription: Planted.\nalways: true\n---\nADA-OBEY")
    bob = User.objects.create_user("bob", password="pw-bob-123")
    (make_user_folder(workspace, "bob") / "SOUL.md").write_text("BOB-SOUL")
    client.force_login(User.objects.create_superuser("boss", password="pw-boss-123"))

    users = client.get("/admin/auth/user/").content.decode()
    assert page_of(ada) in users and "prompt files" in users
    assert page_of(ada) in client.get(f"/admin/auth/user/{ada.pk}/change/").content.decode()

    page = client.get(page_of(ada))
    assert page.status_code == 200
    text = page.content.decode()
    assert "ADA-AGENTS" in text and "ADA-OBEY" in text and "skills/obey/SKILL.md" in text
    assert "OPS-AGENTS" not in text and "BOB-SOUL" not in text
    assert "BOB-SOUL" in client.get(page_of(bob)).content.decode()

    removed = client.post(page_of(ada), {"kind": "skill", "name": "obey"}, follow=True)
    assert removed.status_code == 200 and "Removed the skill obey" in removed.content.decode()
    assert not (ada_folder / "skills" / "obey").exists()
    client.post(page_of(ada), {"kind": "bootstrap", "name": "AGENTS.md"})
    assert not (ada_folder / "AGENTS.md").exists()
    assert (workspace / "AGENTS.md").read_text() == "OPS-AGENTS"
    # Only a bootstrap file's name: nothing else at the top of the folder.
    (ada_folder / "notes.md").write_text("keep")
    client.post(page_of(ada), {"kind": "bootstrap", "name": "notes.md"})
    assert (ada_folder / "notes.md").exists()


def test_the_page_is_staffs_and_removing_needs_the_right_to_change_users(
    client: Client, ada: User, ada_folder: Path
) -> None:
    (ada_folder / "AGENTS.md").write_text("ADA-AGENTS")

    assert client.get(page_of(ada)).status_code == 302  # to the admin's login
    client.force_login(ada)
    for answer in (client.get(page_of(ada)), client.post(page_of(ada), {"kind": "bootstrap"})):
        assert answer.status_code == 302 and "/admin/login/" in answer["Location"]

    viewer = User.objects.create_user("viewer", password="pw-viewer-123", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_user"))
    client.force_login(viewer)
    page = client.get(page_of(ada))
    assert page.status_code == 200 and "ADA-AGENTS" in page.content.decode()
    assert 'value="Delete"' not in page.content.decode()
    sent: dict[str, Any] = {"kind": "bootstrap", "name": "AGENTS.md"}
    assert client.post(page_of(ada), sent).status_code == 403
    assert (ada_folder / "AGENTS.md").exists()

    client.force_login(User.objects.create_user("plain-staff", password="pw-x-123", is_staff=True))
    assert client.get(page_of(ada)).status_code == 403
