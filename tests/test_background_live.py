"""Background work in a real django-q2 cluster (`manage.py qcluster`): a spawned sub-agent
reports back, a cron job fires on time, a sub-agent whose worker is killed is reported
failed, and a page sees a report live. The database is the cluster's: the tests read and
write it from other processes."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import httpx
import pytest

from tests.conftest import LOGIN, ROOT, login_token, python
from tests.jobs import cluster, kill
from tests.llm_server import ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)

# django-q2's cluster looks for due schedules every 30 seconds, the first time 30 seconds
# after it starts.
SCHEDULER_CYCLE = 30


def query(env: dict[str, str], code: str) -> Any:
    """Run `code` (Django set up; it binds `result`) against the cluster's database."""
    program = (
        "import json, django, os\n"
        "os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'agentsite.settings')\n"
        "django.setup()\n"
        f"{code}\n"
        "print(json.dumps(result, default=str))\n"
    )
    done = python(program, env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def wait_for(check: Callable[[], Any], *, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def messages(env: dict[str, str], key: str) -> list[list[str]]:
    return query(
        env,
        "from sessions_app.models import Message\n"
        f"result = list(Message.objects.filter(session__key={key!r}).values_list('role', 'content'))",
    )


def agent(env: dict[str, str], text: str, session: str) -> None:
    done = subprocess.run(
        [sys.executable, "manage.py", "agent", "-m", text, "--session", session],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def test_a_spawned_subagent_reports_back(site_env: dict[str, str], llm: ScriptedLLM) -> None:
    llm.tool_call("spawn", {"task": "Find the biggest file", "label": "biggest"})
    llm.reply("I've asked a helper.")
    agent(site_env, "what is the biggest file?", "cli:boss")
    assert messages(site_env, "cli:boss")[-1] == ["assistant", "I've asked a helper."]

    llm.reply("report.pdf, 3 MB")  # the sub-agent
    llm.reply("The biggest file is report.pdf (3 MB).")  # the announcement's turn
    with cluster(site_env):
        told = wait_for(
            lambda: (
                (found := messages(site_env, "cli:boss"))[-1][1].startswith("The biggest") and found
            ),
            timeout=60,
            what="the sub-agent's announcement",
        )
    announcement = told[-2]
    assert announcement[0] == "user" and "[The sub-agent 'biggest' finished.]" in announcement[1]
    assert "report.pdf, 3 MB" in announcement[1]
    assert llm.requests[2]["messages"][0]["content"].startswith("You are a sub-agent")


def test_a_fresh_clusters_scheduler_fires_cron_on_time_and_fails_killed_turns(
    live_site: str, site_env: dict[str, str], llm: ScriptedLLM
) -> None:
    """What a cluster's scheduler does, checked on one pass of it (each pass is 30 seconds
    apart): a one-off cron job due shortly before it fires and is delivered, and the sweep
    finds the turns whose cluster was killed mid-turn (a worker out of memory, a host gone),
    a queued API task and a spawned sub-agent, marks them failed, and reports the sub-agent's
    failure to the session that spawned it."""
    llm.tool_call("spawn", {"task": "Think for a long time", "label": "ponder"})
    llm.reply("Started.")
    agent(site_env, "ponder this", "cli:boss")
    token = login_token(site_env)
    api = httpx.Client(base_url=live_site, headers={"Authorization": f"Token {token}"})
    task = api.post("/api/tasks", json={"prompt": "think", "wait": False}).json()
    llm.hang(120).hang(120)  # both turns' model calls: their worker dies meanwhile
    with cluster(site_env) as doomed:
        wait_for(lambda: len(llm.requests) == 4, timeout=60, what="both turns to start")
        kill(doomed)
    assert api.get(f"/api/tasks/{task['id']}").json()["status"] == "running"
    # From here on the model echoes: the cron run and the report may come in either order.
    with cluster(site_env):
        # Due a little before the new cluster's first look at its schedules.
        job = query(
            site_env,
            "from datetime import timedelta\n"
            "from django.utils import timezone\n"
            "from django.contrib.auth.models import User\n"
            "from cron_app.services import create_job\n"
            f"owner = User.objects.get(username={LOGIN[0]!r})\n"
            "job = create_job(owner=owner, message='Brief me', session='cli:inbox', kind='at',"
            f" at=timezone.now() + timedelta(seconds={SCHEDULER_CYCLE - 8}))\n"
            "result = {'id': job.pk, 'at': job.at.isoformat()}",
        )
        ran = wait_for(
            lambda: query(
                site_env,
                "from cron_app.models import CronJob\n"
                f"job = CronJob.objects.get(pk={job['id']})\n"
                "result = job.last_run and {'last_run': job.last_run.isoformat(),"
                " 'status': job.last_status, 'enabled': job.enabled}",
            ),
            timeout=SCHEDULER_CYCLE + 30,
            what="the cron job to run",
        )
        told = wait_for(
            lambda: (found := messages(site_env, "cli:boss"))[-1][1].startswith("echo:") and found,
            timeout=30,
            what="the failure's announcement",
        )
    late = (
        datetime.fromisoformat(ran["last_run"]) - datetime.fromisoformat(job["at"])
    ).total_seconds()
    assert 0 <= late <= SCHEDULER_CYCLE + 2, late
    assert ran["status"] == "succeeded" and ran["enabled"] is False  # a one-off job
    [(role, delivered)] = messages(site_env, "cli:inbox")
    assert role == "assistant" and delivered.startswith("echo:") and "Brief me" in delivered

    task = api.get(f"/api/tasks/{task['id']}").json()
    assert task["status"] == "failed" and "stopped before it finished" in task["error"]
    assert "[The sub-agent 'ponder' failed.]" in told[-2][1]
    status = query(
        site_env,
        "from sessions_app.models import Run\nresult = Run.objects.get(channel='subagent').status",
    )
    assert status == "failed"


async def test_a_page_sees_its_subagent_report_live_without_redis(
    live_site: str, site_env: dict[str, str], llm: ScriptedLLM
) -> None:
    """Without Redis the worker and the web server share no channel layer: what the worker
    publishes reaches the page through the database (`agent.turn.relay`). With Redis the
    layer carries it; the test holds either way."""
    import websockets

    token = login_token(site_env)
    url = live_site.replace("http", "ws") + f"/ws/chat/live1/?token={token}"
    llm.tool_call("spawn", {"task": "Check the backups", "label": "backups"})
    llm.reply("A helper is on it.")
    llm.reply("Backups are fine.")  # the sub-agent
    llm.reply("Good news: the backups are fine.")  # the report's turn
    with cluster(site_env):
        async with websockets.connect(url, origin=live_site) as page:
            assert json.loads(await page.recv())["type"] == "history"
            await page.send(json.dumps({"type": "message", "content": "are the backups ok?"}))
            seen: list[dict[str, Any]] = []
            async with asyncio.timeout(60):
                while not (
                    seen
                    and seen[-1]["type"] == "message"
                    and seen[-1]["content"].startswith("Good news")
                ):
                    seen.append(json.loads(await page.recv()))
    kinds = [frame["type"] for frame in seen]
    assert "subagent_spawned" in kinds and "subagent_completed" in kinds
    completed = next(frame for frame in seen if frame["type"] == "subagent_completed")
    assert completed["label"] == "backups" and completed["status"] == "succeeded"
    notes = [f for f in seen if f["type"] == "message" and f["role"] == "system"]
    assert len(notes) == 1 and "[The sub-agent 'backups' finished.]" in notes[0]["content"]
