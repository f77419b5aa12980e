"""What a turn was limited to goes with the work it starts, on the real paths: a web chat
over a daphne process's WebSocket and the task API over HTTP start the work, and a real
django-q2 cluster (`manage.py qcluster`) runs it. A chat where `exec` waits for a yes gets
no `exec` run by a sub-agent it spawned or a job it scheduled; a task limited to some tools
schedules a job whose runs, and spawns a sub-agent whose announcing turn, are offered no
other. The site, the cluster and the test share the scripted model and the workspace."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from websockets.sync.client import connect

from agent.turn.approvals import NO_ONE_TO_ASK
from tests.conftest import LOGIN, login_token
from tests.jobs import cluster
from tests.llm_server import ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)

T = TypeVar("T")
REFUSED = NO_ONE_TO_ASK.format(name="exec")
# A fresh cluster forks its workers first, and the machine may be busy.
WITHIN = 90


@pytest.fixture
def client(live_site: str, site_env: dict[str, str]) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Token {login_token(site_env)}"}
    with httpx.Client(base_url=live_site, headers=headers, timeout=60) as http:
        yield http


def wait_for(check: Callable[[], T], *, what: str) -> T:
    deadline = time.monotonic() + WITHIN
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.25)


def say_in_chat_where_exec_waits(
    live_site: str, client: httpx.Client, site_env: dict[str, str], chat: str, text: str
) -> str:
    """Open web chat `chat` (which makes its session), make `exec` wait for a yes in it,
    send `text` and return the turn's answer."""
    token = login_token(site_env)
    url = live_site.replace("http", "ws") + f"/ws/chat/{chat}/?token={token}"
    with connect(url, origin=live_site, open_timeout=30) as socket:
        assert json.loads(socket.recv(timeout=30))["type"] == "history"
        made = client.patch(f"/api/sessions/web:{chat}", json={"approve_tools": ["exec"]})
        assert made.status_code == 200, made.text
        socket.send(json.dumps({"type": "message", "content": text}))
        while True:
            frame = json.loads(socket.recv(timeout=60))
            if frame["type"] == "message" and frame["role"] == "assistant":
                return str(frame["content"])


def answers(client: httpx.Client, key: str) -> list[str]:
    listed = client.get(f"/api/sessions/{key}/messages").json()
    return [m["content"] for m in listed if m["role"] == "assistant"]


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def tool_names(request: dict[str, Any]) -> list[str]:
    return sorted(tool["function"]["name"] for tool in request.get("tools") or [])


def folder(workspace: Path) -> Path:
    return workspace / "users" / LOGIN[0]


def test_a_sub_agent_a_web_chat_spawns_is_refused_what_waits_there(
    live_site: str,
    client: httpx.Client,
    site_env: dict[str, str],
    llm: ScriptedLLM,
    workspace: Path,
) -> None:
    llm.tool_call("spawn", {"task": "Run: touch spawned.txt", "label": "toucher"})
    llm.reply("Started.")
    said = say_in_chat_where_exec_waits(live_site, client, site_env, "s1", "touch it later")
    assert said == "Started."

    llm.tool_call("exec", {"command": "touch spawned.txt"})  # the sub-agent
    llm.reply("I could not run it.")
    llm.reply("The helper could not touch the file.")  # the announcing turn, in the chat
    with cluster(site_env):
        wait_for(
            lambda: "The helper could not touch the file." in answers(client, "web:s1"),
            what="the sub-agent's announcement",
        )
    assert not (folder(workspace) / "spawned.txt").exists()
    assert "exec" in tool_names(llm.requests[2])
    assert tool_results(llm.requests[3]) == [REFUSED]


def test_a_job_a_web_chat_schedules_is_refused_what_waits_there(
    live_site: str,
    client: httpx.Client,
    site_env: dict[str, str],
    llm: ScriptedLLM,
    workspace: Path,
) -> None:
    llm.tool_call("cron", {"action": "add", "message": "Run: touch job.txt", "every_seconds": 3600})
    llm.reply("Scheduled.")
    said = say_in_chat_where_exec_waits(live_site, client, site_env, "j1", "touch it hourly")
    assert said == "Scheduled."
    (job,) = client.get("/api/cron-jobs").json()
    assert (job["session"], job["approve_tools"], job["tools"]) == ("web:j1", ["exec"], None)
    # The chat lets exec run again: the job keeps what waited when it was scheduled.
    assert client.patch("/api/sessions/web:j1", json={"approve_tools": []}).status_code == 200

    llm.tool_call("exec", {"command": "touch job.txt"}).reply("I could not run it.")
    assert client.post(f"/api/cron-jobs/{job['id']}/run").status_code == 202
    with cluster(site_env):
        wait_for(
            lambda: client.get(f"/api/cron-jobs/{job['id']}").json()["last_status"],
            what="the job's run",
        )
    assert client.get(f"/api/cron-jobs/{job['id']}").json()["last_status"] == "succeeded"
    assert not (folder(workspace) / "job.txt").exists()
    assert tool_results(llm.requests[-1]) == [REFUSED]
    assert answers(client, "web:j1")[-1] == "I could not run it."


def test_a_job_a_limited_task_schedules_is_offered_only_its_tools(
    client: httpx.Client, site_env: dict[str, str], llm: ScriptedLLM
) -> None:
    llm.tool_call("cron", {"action": "add", "message": "Read the log", "every_seconds": 3600})
    llm.reply("Scheduled.")
    body = {"prompt": "read the log hourly", "tools": ["cron", "read_file"]}
    task = client.post("/api/tasks", json=body).json()
    assert task["text"] == "Scheduled.", task
    (job,) = client.get("/api/cron-jobs").json()
    assert job["tools"] == ["cron", "read_file"]

    llm.reply("The log is quiet.")
    assert client.post(f"/api/cron-jobs/{job['id']}/run").status_code == 202
    with cluster(site_env):
        wait_for(
            lambda: client.get(f"/api/cron-jobs/{job['id']}").json()["last_status"],
            what="the job's run",
        )
    assert len(llm.requests) == 3
    # Of the task's tools, the run's kind of turn schedules nothing: read_file is left.
    assert tool_names(llm.requests[2]) == ["read_file"]


def test_the_announcing_turn_of_a_limited_tasks_sub_agent_is_offered_only_its_tools(
    client: httpx.Client, site_env: dict[str, str], llm: ScriptedLLM
) -> None:
    llm.tool_call("spawn", {"task": "Think it over", "label": "thinker"}).reply("Started.")
    task = client.post("/api/tasks", json={"prompt": "think later", "tools": ["spawn"]}).json()
    assert task["text"] == "Started.", task

    llm.reply("Thought it over.")  # the sub-agent
    llm.reply("The helper has thought it over.")  # the announcing turn, in the task's chat
    with cluster(site_env):
        wait_for(
            lambda: "The helper has thought it over." in answers(client, task["session"]),
            what="the sub-agent's announcement",
        )
    sub, told = llm.requests[2:4]
    assert tool_names(sub) == []  # spawn is no sub-agent's
    assert tool_names(told) == ["spawn"]
