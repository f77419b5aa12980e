"""A failure of ours: the user reads a plain sentence with a reference; the detail is logged
under that reference and appears nowhere a user can read it."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from rest_framework.test import APIClient

from agent.turn import run_turn
from sessions_app.models import Run
from tests.llm_server import ScriptedLLM
from tests.ws import open_chat, receive_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]

SECRET = "postgres://agent:hunter2@db.internal/agent"
SORRY = re.compile(r"Sorry, something went wrong on our side \(reference (\w{8})\)\.")


@pytest.fixture
def broken_prompt(monkeypatch: pytest.MonkeyPatch) -> None:
    """Building the prompt fails with an error whose text holds a secret."""

    def fail(**kwargs: Any) -> str:
        raise RuntimeError(f"could not reach {SECRET}")

    monkeypatch.setattr("agent.turn.runner.context.system_prompt", fail)


def logged_under(caplog: pytest.LogCaptureFixture, ref: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if ref in r.getMessage() and r.exc_info]


@pytest.mark.usefixtures("broken_prompt")
async def test_a_crashed_turn_answers_with_a_reference(
    llm: ScriptedLLM, caplog: pytest.LogCaptureFixture
) -> None:
    result = await run_turn("cli:direct", "hello", channel="cli")

    match = SORRY.fullmatch(result.text)
    assert match, result.text
    ref = match[1]
    assert result.status == "failed" and result.error_kind == "internal"
    run = await sync_to_async(Run.objects.get)()
    assert run.status == "failed"
    assert run.text == result.text and run.error == f"internal error (reference {ref})"
    [record] = logged_under(caplog, ref)
    assert SECRET in str(record.exc_info[1])
    assert llm.requests == []


@pytest.mark.usefixtures("broken_prompt")
def test_the_api_shows_the_reference_not_the_detail(
    api: APIClient, caplog: pytest.LogCaptureFixture
) -> None:
    response = api.post("/api/tasks", {"prompt": "hello"}, format="json")

    assert response.status_code == 200
    task = response.json()
    assert task["status"] == "failed"
    ref = SORRY.fullmatch(task["text"])[1]
    assert task["error"] == f"internal error (reference {ref})"
    assert "hunter2" not in response.content.decode()
    assert logged_under(caplog, ref)


@pytest.mark.usefixtures("broken_prompt")
async def test_the_chat_shows_the_reference_not_the_detail(
    token: str, caplog: pytest.LogCaptureFixture
) -> None:
    socket, _ = await open_chat("oops", token)
    await socket.send_json_to({"type": "message", "content": "hello"})

    frames = await receive_until(socket, "message", role="assistant")
    await socket.disconnect()

    ref = SORRY.fullmatch(frames[-1]["content"])[1]
    assert logged_under(caplog, ref)
    assert not any("hunter2" in str(frame) for frame in frames)
