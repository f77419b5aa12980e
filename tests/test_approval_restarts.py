"""A turn that waits for a person holds no process: real processes are stopped under it
and it goes on all the same. A daphne whose chat asked is restarted, and the new one's
socket is asked and answered; a worker cluster whose queued task asked is killed, and a
new cluster goes on with the task once it is answered through the API; and a cluster's
dispatcher lets a call that nobody answers count as declined, and goes on with its turn."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django_q.tasks import async_task

from agent import jobs
from agent.turn import approve_task
from sessions_app import runs as run_records
from sessions_app import services
from sessions_app.models import Approval, Run
from tests.conftest import LOGIN, ROOT, folder_of, free_port, login_token, wait_for_port
from tests.jobs import cluster, kill
from tests.llm_server import ScriptedLLM
from tests.test_faults_workers import wait_for, worker_env  # noqa: F401  (a fixture)
from tests.test_watch_daphne import SiteRecords

pytestmark = pytest.mark.django_db(transaction=True)


@contextmanager
def daphne(env: dict[str, str]) -> Iterator[str]:
    port = free_port()
    command = [sys.executable, "-m", "agentsite.web", "-v", "0", "-b", "127.0.0.1", "-p", str(port)]
    server = subprocess.Popen([*command, "agentsite.asgi:application"], cwd=ROOT, env=env)
    try:
        wait_for_port(port, server)
        yield f"ws://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=10)


async def frames_until(socket: Any, kind: str) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    async with asyncio.timeout(20):
        while not seen or seen[-1]["type"] != kind:
            seen.append(json.loads(await socket.recv()))
    return seen


@pytest.fixture
def chat_env(site_env: dict[str, str]) -> tuple[dict[str, str], str]:
    """The served site's environment, with a login whose token it returns too."""
    env = {
        **site_env,
        "AGENT_APPROVE_TOOLS": "write_file",
        "DJANGO_SUPERUSER_USERNAME": LOGIN[0],
        "DJANGO_SUPERUSER_PASSWORD": LOGIN[1],
    }
    subprocess.run([sys.executable, "manage.py", "ensure_login"], cwd=ROOT, env=env, check=True)
    return env, login_token(env)


async def test_a_chat_waiting_through_a_daphne_restart_is_answered_in_the_new_one(
    chat_env: tuple[dict[str, str], str],
    site_env: dict[str, str],
    llm: ScriptedLLM,
    workspace: Path,
) -> None:
    import websockets

    env, token = chat_env
    records = SiteRecords(site_env)
    llm.tool_call("write_file", {"path": "kept.txt", "content": "kept"})

    with daphne(env) as base:
        async with websockets.connect(f"{base}/ws/chat/r1/?token={token}") as chat:
            await frames_until(chat, "history")
            await chat.send(json.dumps({"type": "message", "content": "write kept.txt"}))
            asked = (await frames_until(chat, "approval_request"))[-1]
            await frames_until(chat, "thinking_finished")
    run = await sync_to_async(records.run_of)("web:r1")
    assert run is not None and run[1] == "waiting"

    llm.reply("Kept it.")
    with daphne(env) as base:
        async with websockets.connect(f"{base}/ws/chat/r1/?token={token}") as chat:
            history = (await frames_until(chat, "history"))[-1]
            assert history["running"] is False
            assert [m["role"] for m in history["messages"]] == ["user", "assistant"]
            assert json.loads(await chat.recv()) == asked
            await chat.send(json.dumps({"type": "approve", "id": asked["id"], "allow": True}))
            frames = await frames_until(chat, "message")
            while frames[-1].get("role") != "assistant":
                frames += await frames_until(chat, "message")
    assert frames[-1]["content"] == "Kept it."
    assert any(f["type"] == "approval_resolved" and f["allow"] for f in frames)
    assert await sync_to_async(records.status)(run[0]) == "succeeded"
    assert (folder_of(workspace, LOGIN[0]) / "kept.txt").read_text() == "kept"
    results = [m for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert results[-1]["tool_call_id"] == asked["id"] and results[-1]["content"].startswith("Wrote")


def queue_task(owner: User, prompt: str, key: str) -> Run:
    session = services.get_or_create_session(key=key, owner=owner)
    run = run_records.queue_run(session=session, channel="api", prompt=prompt, model="")
    async_task(jobs.RUN_QUEUED_TASK, str(run.pk), task_name=f"turn-{run.pk}")
    return run


def status_of(run: Run) -> str:
    return Run.objects.get(pk=run.pk).status


def test_a_task_waiting_through_a_killed_worker_goes_on_in_the_next(
    worker_env: dict[str, str],  # noqa: F811
    llm: ScriptedLLM,
    workspace: Path,
) -> None:
    env = {**worker_env, "AGENT_APPROVE_TOOLS": "write_file"}
    ada = User.objects.create_user("ada", password="pw-ada-123")
    llm.tool_call("write_file", {"path": "report.txt", "content": "filed"}).reply("Filed.")
    run = queue_task(ada, "file the report", "api:report")

    with cluster(env, graceful=False) as doomed:
        wait_for(lambda: status_of(run) == "waiting", what="the task to wait for an answer")
        kill(doomed)
    # The sweep leaves a waiting turn alone: no process is meant to run it.
    assert run_records.fail_dead_runs() == []
    assert status_of(run) == "waiting"
    (call,) = Approval.objects.filter(run=run)
    assert call.name == "write_file" and call.status == "pending"

    task, queued = approve_task(
        Run.objects.get(pk=run.pk), user=ada, call_id=call.call_id, allow=True, wait=False
    )
    assert queued and task.status == "waiting"
    with cluster(env):
        wait_for(lambda: status_of(run) == "succeeded", what="the next worker to go on")
    assert Run.objects.get(pk=run.pk).text == "Filed."
    assert (folder_of(workspace, "ada") / "report.txt").read_text() == "filed"
    results = [m for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert results[-1]["content"].startswith("Wrote")


def test_a_call_nobody_answers_is_declined_by_the_dispatcher_in_time(
    worker_env: dict[str, str],  # noqa: F811
    llm: ScriptedLLM,
) -> None:
    env = {**worker_env, "AGENT_APPROVE_TOOLS": "write_file", "AGENT_APPROVAL_TIMEOUT": "1"}
    ada = User.objects.create_user("ada", password="pw-ada-123")
    llm.tool_call("write_file", {"path": "late.txt", "content": "late"}).reply("Nobody answered.")
    run = queue_task(ada, "write late.txt", "api:late")

    with cluster(env, graceful=False):
        wait_for(lambda: status_of(run) == "waiting", what="the task to wait for an answer")
        # No schedule's look (30 s apart) is waited for: the dispatcher looks every second.
        wait_for(lambda: status_of(run) == "succeeded", what="the timeout", timeout=15)
    assert Approval.objects.get(run=run).status == "expired"
    (result,) = [m for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert result["content"].startswith("Error: the user declined write_file(path='late.txt'")
    assert "no answer came within 1 second," in result["content"]


async def test_a_chat_call_nobody_answers_goes_on_in_the_worker_and_the_tab_hears_it(
    worker_env: dict[str, str],  # noqa: F811
    llm: ScriptedLLM,
) -> None:
    """The chat's turn waits in daphne's database rows; the cluster beside it lets the call
    count as declined and goes on with the turn, and the open tab sees all of it."""
    import websockets
    from rest_framework.authtoken.models import Token

    env = {**worker_env, "AGENT_APPROVE_TOOLS": "write_file", "AGENT_APPROVAL_TIMEOUT": "2"}
    ada = await sync_to_async(User.objects.create_user)("ada", password="pw-ada-123")
    token = (await sync_to_async(Token.objects.create)(user=ada)).key
    llm.tool_call("write_file", {"path": "t.txt", "content": "t"}).reply("Nobody said yes.")

    with daphne(env) as base, cluster(env, graceful=False):
        async with websockets.connect(f"{base}/ws/chat/late/?token={token}") as chat:
            await frames_until(chat, "history")
            await chat.send(json.dumps({"type": "message", "content": "write t.txt"}))
            asked = (await frames_until(chat, "approval_request"))[-1]
            frames = await frames_until(chat, "approval_resolved")
            assert frames[-1]["id"] == asked["id"] and frames[-1]["reason"] == "timeout"
            frames = await frames_until(chat, "message")
            while frames[-1].get("role") != "assistant":
                frames += await frames_until(chat, "message")
    assert frames[-1]["content"] == "Nobody said yes."
    run = await sync_to_async(Run.objects.get)(session__key="web:late")
    assert run.status == "succeeded"
