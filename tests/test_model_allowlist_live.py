"""The model allow-list through every door of a real site: the task API over HTTP and the
chat socket, both served by daphne, and the command line as a subprocess. The scripted
model must hear nothing of an id that is not allowed."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import httpx
import pytest

from tests.conftest import ROOT, login_token, run_manage
from tests.llm_server import ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)

ALLOWED = "openai/scripted, openai/second"


@pytest.fixture
def site_env(site_env: dict[str, str]) -> dict[str, str]:
    """The operator lets users pick one model besides the default."""
    return {**site_env, "AGENT_MODELS": "openai/second"}


@pytest.fixture
def token(live_site: str, site_env: dict[str, str]) -> str:
    return login_token(site_env)


def refusal(model: str) -> str:
    return f"the model {model} is not available here; choose one of: {ALLOWED}"


def test_the_task_api_refuses_a_model_off_the_list_with_a_400(
    live_site: str, token: str, llm: ScriptedLLM
) -> None:
    headers = {"Authorization": f"Token {token}"}
    with httpx.Client(base_url=live_site, headers=headers, timeout=30) as client:
        for model in ("ollama/llama3", "7", "openai/gpt-4o"):
            for wait in (True, False):
                body = {"prompt": "hi", "session": "api:refused", "model": model, "wait": wait}
                response = client.post("/api/tasks", json=body)
                assert response.status_code == 400, response.text
                assert response.json() == {"model": [refusal(model)]}
        # Nothing was recorded: not even the session the task named.
        assert client.get("/api/sessions").json() == []
        assert llm.requests == []

        llm.reply("from the second model")
        chosen = client.post("/api/tasks", json={"prompt": "hi", "model": "openai/second"})
        assert chosen.status_code == 200, chosen.text
        assert chosen.json()["text"] == "from the second model"
        assert [r["model"] for r in llm.requests] == ["second"]

        listed = client.get("/api/models")
        assert listed.json() == {
            "default": "openai/scripted",
            "models": ["openai/scripted", "openai/second"],
        }
        schema = client.get("/api/schema", headers={"Accept": "application/vnd.oai.openapi+json"})
        models = schema.json()["paths"]["/api/models"]["get"]
        assert set(models["responses"]) >= {"200", "401"}


async def test_the_chat_socket_refuses_a_model_off_the_list(
    live_site: str, token: str, llm: ScriptedLLM
) -> None:
    import websockets

    url = live_site.replace("http", "ws") + f"/ws/chat/pick/?token={token}"
    async with websockets.connect(url, origin=live_site) as chat:
        assert json.loads(await chat.recv())["type"] == "history"

        await chat.send(json.dumps({"type": "message", "content": "/model ollama/llama3"}))
        assert await next_frame(chat, "error") == {
            "type": "error",
            "message": refusal("ollama/llama3"),
        }
        await chat.send(json.dumps({"type": "message", "content": "/model"}))
        shown = await next_frame(chat, "message")
        assert shown["content"] == f"Model: openai/scripted\nAvailable: {ALLOWED}"

        llm.reply("still the default")
        await chat.send(json.dumps({"type": "message", "content": "hello"}))
        assert (await next_frame(chat, "message"))["content"] == "still the default"

        await chat.send(json.dumps({"type": "message", "content": "/model openai/second"}))
        switched = await next_frame(chat, "message")
        assert switched["content"] == "This session now uses openai/second."
        llm.reply("from the second model")
        await chat.send(json.dumps({"type": "message", "content": "hello again"}))
        assert (await next_frame(chat, "message"))["content"] == "from the second model"

    assert [r["model"] for r in llm.requests] == ["scripted", "second"]


async def next_frame(chat: Any, frame_type: str) -> dict[str, Any]:
    """The next frame of `frame_type` (a `message` one from the assistant)."""
    while True:
        frame = json.loads(await chat.recv())
        if frame["type"] == frame_type and frame.get("role", "assistant") == "assistant":
            return dict(frame)


@pytest.mark.parametrize("model", ["7", "ollama/llama3"])
def test_the_command_line_refuses_a_model_off_the_list_in_one_line(
    site_env: dict[str, str], llm: ScriptedLLM, model: str
) -> None:
    done = run_manage({**site_env, "AGENT_MODELS": ""}, "agent", "-m", "hi", "--model", model)

    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"CommandError: the model {model} is not available here; choose one of: openai/scripted"
    ]
    assert llm.requests == []


def test_an_interactive_chat_with_a_model_off_the_list_does_not_start(
    site_env: dict[str, str], llm: ScriptedLLM
) -> None:
    done = subprocess.run(
        [sys.executable, "manage.py", "agent", "--model", "ollama/llama3"],
        cwd=ROOT,
        env=site_env,
        input="hello\nquit\n",
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"CommandError: {refusal('ollama/llama3')}"]
    assert "Traceback" not in done.stderr and llm.requests == []
