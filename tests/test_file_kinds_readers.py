"""What the server itself reads or writes in a user's folder meets the named pipes and
sockets the user's agent may leave there (`exec` makes them) as the file tools do: uploads
never open one, and the readers of the user's prompt files (bootstrap files, skills,
HEARTBEAT.md) leave it out at once, so that neither a request nor a turn waits for a pipe's
other end."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from agent.conf import agent_settings as current_settings
from agent.tools.guards.folders import make_user_folder
from agent.turn import SessionRef, run_turn
from agent.turn.heartbeat import open_tasks
from tests.llm_server import ScriptedLLM

pytestmark = pytest.mark.usefixtures("agent_settings")

T = TypeVar("T")
PROMPT = 20.0


def within(seconds: float, work: Callable[[], T]) -> T:
    """`work()`, failing the test rather than hanging it when it takes longer than
    `seconds` (a thread waiting in a pipe's open would never come back)."""
    outcome: list[Any] = []
    thread = threading.Thread(target=lambda: outcome.append(work()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still waiting after {seconds} s"
    assert outcome, "it raised; see the thread's traceback above"
    return outcome[0]


def upload(client: APIClient, name: str) -> Any:
    file = SimpleUploadedFile(name, b"uploaded")
    return client.post("/api/uploads", {"file": file}, format="multipart")


@pytest.fixture
def folder(ada: User, workspace: Path) -> Path:
    return make_user_folder(workspace, "ada")


@pytest.mark.django_db
def test_an_upload_never_opens_a_pipe_at_its_name(api: APIClient, folder: Path) -> None:
    (folder / "uploads").mkdir()
    os.mkfifo(folder / "uploads" / "report.txt")

    response = within(PROMPT, lambda: upload(api, "report.txt"))

    assert response.status_code == 201, response.content
    assert response.json()["path"] == "uploads/report (1).txt"
    assert (folder / "uploads" / "report.txt").is_fifo()
    listed = within(PROMPT, lambda: api.get("/api/uploads")).json()
    assert [entry["name"] for entry in listed] == ["report (1).txt"]


@pytest.mark.django_db
def test_a_pipe_in_place_of_the_uploads_folder_is_refused_at_once(
    api: APIClient, folder: Path
) -> None:
    os.mkfifo(folder / "uploads")
    assert within(PROMPT, lambda: upload(api, "a.txt")).status_code == 409
    assert within(PROMPT, lambda: api.get("/api/uploads")).status_code == 409
    assert (folder / "uploads").is_fifo()


@pytest.mark.django_db
def test_prompt_files_that_are_pipes_are_left_out_at_once(api: APIClient, folder: Path) -> None:
    (folder / "USER.md").write_text("ada's own")
    os.mkfifo(folder / "AGENTS.md")
    (folder / "skills" / "piped").mkdir(parents=True)
    os.mkfifo(folder / "skills" / "piped" / "SKILL.md")

    listed = within(PROMPT, lambda: api.get("/api/prompt-files"))
    assert [entry["name"] for entry in listed.json()] == ["USER.md"]
    assert within(PROMPT, lambda: api.get("/api/prompt-files/AGENTS.md")).status_code == 404
    skills = within(PROMPT, lambda: api.get("/api/skills")).json()
    assert "piped" not in [skill["name"] for skill in skills]


def test_a_heartbeat_file_that_is_a_pipe_has_no_tasks(folder: Path) -> None:
    os.mkfifo(folder / "HEARTBEAT.md")
    assert within(PROMPT, lambda: open_tasks(current_settings(), "ada")) == ""


@pytest.mark.django_db(transaction=True)
async def test_a_turn_builds_its_prompt_past_pipes_in_the_folder(
    llm: ScriptedLLM, workspace: Path
) -> None:
    user = await User.objects.acreate_user("ada", password="pw")
    folder = make_user_folder(workspace, "ada")
    (folder / "SOUL.md").write_text("ada-soul-31f2")
    for name in ("AGENTS.md", "USER.md", "TOOLS.md", "IDENTITY.md"):
        os.mkfifo(folder / name)
    (folder / "skills" / "piped").mkdir(parents=True)
    os.mkfifo(folder / "skills" / "piped" / "SKILL.md")
    llm.reply("Hello.")

    async with asyncio.timeout(PROMPT):
        outcome = await run_turn(SessionRef("web:pipes", user), "hi", channel="web")
    assert outcome.text == "Hello."
    assert "ada-soul-31f2" in llm.requests[-1]["messages"][0]["content"]
