"""A run's trace on the task API over real HTTP: each model call and tool call in order, with
tokens and cost, failures and stops; and nothing at all with AGENT_TRACE off."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import datetime
from typing import Any

import httpx
import pytest

from tests.conftest import ROOT, login_token
from tests.llm_server import ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)

# A model id of litellm's price table: the scripted server answers to any id.
PRICED_MODEL = "openai/gpt-4o-mini"


@pytest.fixture
def token(live_site: str, site_env: dict[str, str]) -> str:
    return login_token(site_env)


@pytest.fixture
def client(live_site: str, token: str) -> Any:
    headers = {"Authorization": f"Token {token}"}
    with httpx.Client(base_url=live_site, headers=headers, timeout=60) as http:
        yield http


@pytest.fixture
def priced(site_env: dict[str, str]) -> None:
    site_env["AGENT_MODEL"] = PRICED_MODEL


@pytest.fixture
def untraced(site_env: dict[str, str]) -> None:
    site_env["AGENT_TRACE"] = "false"


def task(client: httpx.Client, prompt: str, **fields: Any) -> dict[str, Any]:
    response = client.post("/api/tasks", json={"prompt": prompt, **fields})
    assert response.status_code in (200, 202), response.text
    return dict(response.json())


def shape(trace: list[dict[str, Any]]) -> list[tuple[str, str, str | None]]:
    return [(step["kind"], step["name"], step["error"]) for step in trace]


@pytest.mark.usefixtures("priced")
def test_a_task_lists_its_model_and_tool_calls_in_order(
    client: httpx.Client, llm: ScriptedLLM
) -> None:
    llm.tool_call("write_file", {"path": "notes.txt", "content": "one"}, delay=0.05)
    # Read side by side: listed in the order the model gave them, however they end.
    llm.tool_calls([("read_file", {"path": "notes.txt"}), ("read_file", {"path": "gone.txt"})])
    llm.reply("Read it.")
    done = task(client, "write then read")
    assert done["status"] == "succeeded", done

    trace = done["trace"]
    assert shape(trace)[:2] == [("model", PRICED_MODEL, None), ("tool", "write_file", None)]
    assert shape(trace)[2:4] == [("model", PRICED_MODEL, None), ("tool", "read_file", None)]
    assert trace[4]["kind"] == "tool" and trace[4]["name"] == "read_file"
    assert "gone.txt" in trace[4]["error"]  # the tool answered `Error: …`
    assert shape(trace)[5:] == [("model", PRICED_MODEL, None)]

    models = [step for step in trace if step["kind"] == "model"]
    tools = [step for step in trace if step["kind"] == "tool"]
    assert all(set(step) == {"kind", "name", "started", "ms", "error"} for step in tools)
    assert all(
        set(step) == {"kind", "name", "started", "ms", "error", "tokens", "cost"} for step in models
    )
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        assert sum(step["tokens"][key] for step in models) == done["usage"][key] > 0
    assert all(isinstance(step["cost"], float) and step["cost"] > 0 for step in models)
    assert models[0]["ms"] >= 50  # the model's scripted pause before its first call
    starts = [datetime.fromisoformat(step["started"]) for step in trace]
    assert starts == sorted(starts) and starts[0].utcoffset() is not None
    assert client.get(f"/api/tasks/{done['id']}").json()["trace"] == trace


def test_a_failed_model_call_and_a_stopped_run_keep_their_steps(
    client: httpx.Client, llm: ScriptedLLM, site_env: dict[str, str]
) -> None:
    llm.fault(400, body={"error": {"message": "no such thing"}})
    failed = task(client, "ask something odd")
    assert failed["status"] == "failed"
    [step] = failed["trace"]
    assert step["kind"] == "model" and step["name"] == "openai/scripted"
    assert step["error"] == "the model provider rejected the request (HTTP 400)"
    assert step["tokens"] is None and step["cost"] is None

    llm.tool_call("exec", {"command": "sleep 30"})
    queued = task(client, "a long job", wait=False)
    worker = subprocess.Popen([sys.executable, "manage.py", "qcluster"], cwd=ROOT, env=site_env)
    try:
        # Saved while the turn runs, with its messages: a run whose process dies keeps them.
        running = until(client, queued["id"], lambda run: bool(run["trace"]))
        assert running["status"] == "running"
        assert shape(running["trace"]) == [("model", "openai/scripted", None)]

        client.post(f"/api/tasks/{queued['id']}/cancel")
        stopped = until(client, queued["id"], lambda run: run["status"] != "running")
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    assert stopped["status"] == "cancelled"
    assert shape(stopped["trace"]) == [
        ("model", "openai/scripted", None),
        ("tool", "exec", "stopped"),
    ]


def until(client: httpx.Client, task_id: str, done: Any, timeout: float = 60) -> dict[str, Any]:
    """The task, once `done` says so of it."""
    deadline = time.monotonic() + timeout
    while True:
        run = dict(client.get(f"/api/tasks/{task_id}").json())
        if done(run):
            return run
        assert time.monotonic() < deadline, f"the task never got there: {run}"
        time.sleep(0.1)


@pytest.mark.usefixtures("untraced")
def test_with_tracing_off_nothing_is_recorded(client: httpx.Client, llm: ScriptedLLM) -> None:
    llm.tool_call("write_file", {"path": "a.txt", "content": "a"}).reply("Written.")
    done = task(client, "write a")
    assert done["status"] == "succeeded" and done["tools_used"] == ["write_file"]
    assert done["trace"] == []
