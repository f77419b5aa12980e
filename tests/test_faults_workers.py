"""Workers killed mid-turn: a real django-q2 cluster (`manage.py qcluster`) is running a cron
job's or a sub-agent's turn, waiting for a model call or a tool that hangs, when the whole
cluster gets SIGKILL (a worker out of memory, a host gone). Then the sweep that production
schedules marks the run failed, the job is planned again and runs at its next time, the
history stays valid for the next model call, and the chat that waits for the result reads
a plain sentence.

The cluster shares the test's own database (the SQLite file or the PostgreSQL database),
so the test reads and writes it with the ORM while the cluster runs."""

from __future__ import annotations

import ast
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from django.utils import timezone
from django_q.models import Schedule
from django_q.tasks import async_task

from agent.job_functions import SWEEP_SCHEDULE
from agent.turn import SessionRef, run_turn
from cron_app import services as job_services
from cron_app.models import CronJob
from sessions_app.models import STALE_AFTER_SECONDS, Message, Run
from tests.conftest import _database_url, clean_env
from tests.jobs import cluster, kill
from tests.llm_server import ScriptedLLM
from tests.test_faults import assert_plain, assert_valid_history

pytestmark = pytest.mark.django_db(transaction=True)

T = TypeVar("T")


@pytest.fixture
def worker_env(tmp_path: Path, workspace: Path, llm: ScriptedLLM) -> dict[str, str]:
    """The environment of a cluster that uses the scripted model and this test's database."""
    url = _database_url()
    if url is None:
        name = str(connection.settings_dict["NAME"])
        if "memory" in name:
            pytest.skip("the test database is in memory: no other process can open it")
        url = f"sqlite:///{name}"
    env = clean_env()
    env.update(
        {
            "DATABASE_URL": url,
            "AGENT_MODEL": "openai/scripted",
            "AGENT_API_BASE": llm.base_url,
            "AGENT_API_KEY": "test-key",
            "AGENT_WORKSPACE": str(workspace),
            "AGENT_DATA_DIR": str(tmp_path / "data"),
            "AGENT_LLM_RETRY_BUDGET": "5",
            "AGENT_HEARTBEAT_INTERVAL": "0",
            "AGENT_TOOLS": "tests.custom_tools.WhoAmI",
            "PYTHONUNBUFFERED": "1",
            # Queued tasks are signed: the test queues what the cluster runs.
            "DJANGO_SECRET_KEY": settings.SECRET_KEY,
        }
    )
    return env


def wait_for(check: Callable[[], T], *, what: str, timeout: float = 30) -> T:
    # Generous: a fresh cluster forks its workers first, and CI runs two suites at once.
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def fire_schedule(name: str) -> None:
    """Queue what the schedule `name` runs, as django-q2's scheduler would when it is due:
    its first look comes 30 seconds after a cluster starts, too long to wait for."""
    schedule = Schedule.objects.get(name=name)
    args = ast.literal_eval(schedule.args) if schedule.args else ()
    async_task(schedule.func, *args, task_name=f"{name} (test)")


def make_due(job: CronJob) -> datetime:
    """Bring the job's next run to now, for the cluster's dispatcher to start at once."""
    due = timezone.now()
    CronJob.objects.filter(pk=job.pk).update(next_run=due)
    return due


def as_if_dead_for_a_while(run: Run) -> None:
    """The run's mark of life as it is once the sweep may take the run for dead, which is
    STALE_AFTER_SECONDS after it was last marked alive: too long to wait for."""
    long_ago = timezone.now() - timedelta(seconds=2 * STALE_AFTER_SECONDS)
    Run.objects.filter(pk=run.pk).update(last_alive=long_ago)


def sweep_until_failed(run: Run) -> Run:
    """Date the run's mark of life back and fire the sweep until the sweep fails the run:
    more than once if need be, since a mark of life that the killed worker sent as it died
    can still land after the dating back (the database serves each connection on its own),
    and a fresh cluster on a loaded machine may take a while to pick the sweep up."""
    deadline = time.monotonic() + 40
    while True:
        as_if_dead_for_a_while(run)
        fire_schedule(SWEEP_SCHEDULE)
        try:
            return wait_for(
                lambda: Run.objects.filter(pk=run.pk, status="failed").first(),
                what="the sweep to fail the run",
                timeout=8,
            )
        except AssertionError:
            if time.monotonic() > deadline:
                raise


def texts(key: str) -> list[tuple[str, str]]:
    return list(
        Message.objects.filter(session__key=key).order_by("id").values_list("role", "content")
    )


# Where the turn is when its worker dies: waiting for the model after a tool ran, or in a
# tool, its call saved and its result never to come.
KILLED_IN = {
    "model call": (
        lambda llm: llm.tool_call("list_dir", {"path": "."}).hang(60),
        lambda key: Message.objects.filter(session__key=key, role="tool").exists(),
        ["system", "user", "assistant", "tool", "user"],
    ),
    "tool": (
        lambda llm: llm.tool_call("whoami", {"wait": 60}),
        lambda key: Message.objects.filter(session__key=key, tool_calls__isnull=False).exists(),
        # The call without its result is left out; the user's words stay.
        ["system", "user", "user"],
    ),
}


@pytest.mark.parametrize("where", KILLED_IN)
def test_a_cron_run_whose_worker_is_killed_fails_and_the_job_runs_again(
    worker_env: dict[str, str], llm: ScriptedLLM, where: str
) -> None:
    script, under_way, history = KILLED_IN[where]
    ada = User.objects.create_user("ada", password="pw-ada-123")
    job = job_services.create_job(
        owner=ada, message="Brief me", session="web:inbox", kind="every", every_seconds=3600
    )
    script(llm)

    with cluster(worker_env, graceful=False) as doomed:
        due = make_due(job)
        wait_for(lambda: under_way(f"cron:{job.pk}"), what=f"the turn to be in its {where}")
        if where == "model call":
            wait_for(lambda: len(llm.requests) == 2, what="the second model call")
        kill(doomed)

    run = Run.objects.get(session__key=f"cron:{job.pk}")
    assert run.status == "running"
    # The run planned the job's next time before its turn began.
    assert CronJob.objects.get(pk=job.pk).next_run == due + timedelta(seconds=3600)

    llm.reply("Nothing new since yesterday.")
    with cluster(worker_env, graceful=False):
        run = sweep_until_failed(run)
        told = wait_for(lambda: texts("web:inbox"), what="the job's chat to hear of it")
        job = CronJob.objects.get(pk=job.pk)
        assert (job.last_status, job.enabled) == ("failed", True)
        [(role, sentence)] = told
        assert role == "assistant" and "'Brief me'" in sentence and run.error in sentence
        assert_plain(sentence)
        assert job.next_run == due + timedelta(seconds=3600)

        # Its next time comes: it runs, and its model call is sent a valid history.
        due = make_due(job)
        wait_for(lambda: len(texts("web:inbox")) == 2, what="the next run's answer")
    assert texts("web:inbox")[-1] == ("assistant", "Nothing new since yesterday.")
    job = CronJob.objects.get(pk=job.pk)
    assert job.last_status == "succeeded" and job.next_run == due + timedelta(seconds=3600)
    sent = llm.requests[-1]
    assert_valid_history(sent)
    assert [m["role"] for m in sent["messages"]] == history


def test_a_subagent_whose_worker_is_killed_is_reported_failed(
    worker_env: dict[str, str], llm: ScriptedLLM, agent_settings: Any
) -> None:
    ada = User.objects.create_user("ada", password="pw-ada-123")
    llm.tool_call("spawn", {"task": "Think for a long time", "label": "ponder"})
    llm.reply("A helper is on it.")
    async_to_sync(run_turn)(SessionRef("web:boss", ada), "ponder this", channel="web")
    llm.hang(60)  # the sub-agent's model call

    with cluster(worker_env, graceful=False) as doomed:
        wait_for(lambda: len(llm.requests) == 3, what="the sub-agent's model call")
        kill(doomed)

    [run] = Run.objects.filter(channel="subagent")
    assert run.status == "running"

    llm.reply("Sorry: the helper stopped before it finished; shall I try again?")
    with cluster(worker_env, graceful=False):
        sweep_until_failed(run)
        wait_for(lambda: len(texts("web:boss")) == 6, what="the agent to tell the user of it")
    run.refresh_from_db()
    assert run.status == "failed" and run.error
    *_, (_, note), (role, answer) = texts("web:boss")
    assert note.startswith("[The sub-agent 'ponder' failed.]") and run.error in note
    assert_plain(note)
    assert role == "assistant" and answer.startswith("Sorry: the helper stopped")
    assert_valid_history(llm.requests[-1])
