"""The production layout in miniature: two daphne processes and two workers on one
PostgreSQL and one Redis. A conversation open on both processes sees every turn's answer,
turns sent to both at once run one after the other with none lost, and a cron job fires
once, not once per worker."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from django.utils import timezone

from cron_app import services as job_services
from sessions_app.models import Message, Run
from tests.conftest import LOGIN, ROOT, free_port, login_token, wait_for_port
from tests.llm_server import ScriptedLLM

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql" or not settings.REDIS_URL,
        reason="the layout runs on PostgreSQL and Redis (the second CI pass); on the SQLite "
        "default the processes of one host share a lock file and the database relay instead",
    ),
]

# django-q2's cluster looks for due schedules every 30 seconds, the first time 30 seconds
# after it starts.
SCHEDULER_CYCLE = 30


@pytest.fixture
def env(site_env: dict[str, str]) -> dict[str, str]:
    return {
        **site_env,
        "REDIS_URL": settings.REDIS_URL,
        "DJANGO_SUPERUSER_USERNAME": LOGIN[0],
        "DJANGO_SUPERUSER_PASSWORD": LOGIN[1],
    }


@pytest.fixture
def processes(env: dict[str, str]) -> Iterator[list[str]]:
    """Two web processes and two workers; the web processes' base URLs."""
    subprocess.run([sys.executable, "manage.py", "ensure_login"], cwd=ROOT, env=env, check=True)
    ports = [free_port(), free_port()]
    daphne = [sys.executable, "-m", "agentsite.web", "-v", "0", "-b", "127.0.0.1"]
    web = [
        subprocess.Popen(
            [*daphne, "-p", str(port), "agentsite.asgi:application"],
            cwd=ROOT,
            env=env,
            start_new_session=True,
        )
        for port in ports
    ]
    workers = [
        subprocess.Popen(
            [sys.executable, "manage.py", "qcluster"], cwd=ROOT, env=env, start_new_session=True
        )
        for _ in range(2)
    ]
    started = web + workers
    try:
        for port, process in zip(ports, web, strict=True):
            wait_for_port(port, process)
        yield [f"http://127.0.0.1:{port}" for port in ports]
    finally:
        for process in started:
            process.terminate()
        for process in started:
            process.wait(timeout=30)


async def frames_until(socket: Any, count: int, *, timeout: float = 30) -> list[dict[str, Any]]:
    """Frames until `count` final answers (assistant messages with a run) have arrived."""
    seen: list[dict[str, Any]] = []
    async with asyncio.timeout(timeout):
        while len(answers(seen)) < count:
            seen.append(json.loads(await socket.recv()))
    return seen


def answers(frames: list[dict[str, Any]]) -> list[str]:
    return [f["content"] for f in frames if f["type"] == "message" and f["role"] == "assistant"]


async def test_two_processes_share_a_conversation_and_serialise_its_turns(
    processes: list[str], env: dict[str, str], llm: ScriptedLLM
) -> None:
    import websockets

    token = login_token(env)
    # Each answer takes a while, so that the two turns would overlap if nothing held them.
    llm.reply("The first answer.", delay=0.8)
    llm.reply("The second answer.", delay=0.8)
    sockets = [
        websockets.connect(url.replace("http", "ws") + f"/ws/chat/team/?token={token}", origin=url)
        for url in processes
    ]
    async with sockets[0] as one, sockets[1] as two:
        for socket in (one, two):
            assert json.loads(await socket.recv())["type"] == "history"
        await asyncio.gather(
            one.send(json.dumps({"type": "message", "content": "question one"})),
            two.send(json.dumps({"type": "message", "content": "question two"})),
        )
        seen_one, seen_two = await asyncio.gather(frames_until(one, 2), frames_until(two, 2))

    # Both processes' sockets saw both answers, whichever process ran the turn.
    assert sorted(answers(seen_one)) == sorted(answers(seen_two))
    assert sorted(answers(seen_one)) == ["The first answer.", "The second answer."]

    @sync_to_async
    def record() -> tuple[list[Run], list[str]]:
        runs = list(Run.objects.filter(session__key="web:team").order_by("started"))
        roles = list(Message.objects.filter(session__key="web:team").values_list("role", flat=True))
        return runs, roles

    runs, roles = await record()
    assert [run.status for run in runs] == ["succeeded", "succeeded"]
    assert runs[0].finished <= runs[1].started  # one after the other, not side by side
    assert roles == ["user", "assistant", "user", "assistant"]  # none lost, none interleaved


def test_a_cron_job_fires_once_with_two_workers(
    processes: list[str], env: dict[str, str], llm: ScriptedLLM
) -> None:
    owner = User.objects.get(username=LOGIN[0])
    job = job_services.create_job(
        owner=owner,
        message="Say hello",
        session="web:cronned",
        kind="at",
        at=timezone.now() + timedelta(seconds=5),
    )
    llm.reply("Hello from the job.").reply("A second run: this must not happen.")

    deadline = timezone.now() + timedelta(seconds=SCHEDULER_CYCLE + 20)
    while timezone.now() < deadline:
        job.refresh_from_db()
        if job.last_status:
            break
        time.sleep(0.5)
    assert job.last_status == "succeeded"
    # Both workers' schedulers have looked at the schedule by now.
    time.sleep(3)
    assert Run.objects.filter(session__key=f"cron:{job.pk}").count() == 1
    delivered = Message.objects.filter(session__key="web:cronned").values_list("content", flat=True)
    assert list(delivered) == ["Hello from the job."]
