"""The heartbeat's schedule follows `AGENT_HEARTBEAT_INTERVAL` from the moment a worker starts
(`manage.py qcluster`), not only from the next `migrate`; 0 turns it off at once, even for a
beat already due; `manage.py heartbeat` runs one beat by hand."""

from __future__ import annotations

import signal
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from django_q.models import Schedule, Success
from django_q.tasks import async_task

from agent import jobs
from agent.job_functions import (
    HEARTBEAT_SCHEDULE,
    ensure_schedules,
    run_heartbeat,
    run_user_heartbeat,
)
from tests.conftest import folder_of, run_manage
from tests.jobs import cluster, hold_queue
from tests.llm_server import ScriptedLLM
from tests.test_faults_workers import wait_for, worker_env  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def env(request: pytest.FixtureRequest) -> dict[str, str]:
    """The environment of a cluster that uses the scripted model and this test's database."""
    return dict(request.getfixturevalue("worker_env"))


OPEN_TASK = "- [ ] water the plants\n"


def stop(worker: Any) -> None:
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0


def heartbeat_schedule() -> Schedule | None:
    return Schedule.objects.filter(name=HEARTBEAT_SCHEDULE).first()


def test_a_worker_start_applies_a_changed_interval(env: dict[str, str], settings: Any) -> None:
    # As `migrate` left it with the default half hour, its next beat half an hour away.
    settings.AGENT_HEARTBEAT_INTERVAL = 1800
    ensure_schedules()
    Schedule.objects.filter(name=HEARTBEAT_SCHEDULE).update(
        next_run=timezone.now() + timedelta(minutes=30)
    )

    with cluster({**env, "AGENT_HEARTBEAT_INTERVAL": "120"}) as worker:
        changed = wait_for(
            lambda: (found := heartbeat_schedule()) and found.minutes == 2 and found,
            what="the schedule to take the new interval",
        )
        stop(worker)
    assert changed.next_run <= timezone.now() + timedelta(minutes=2)


def test_an_interval_of_0_turns_the_heartbeat_off_when_the_worker_starts(
    env: dict[str, str], workspace: Path, llm: ScriptedLLM, settings: Any
) -> None:
    ada = User.objects.create_user("ada", password="pw-ada-123")
    (folder_of(workspace, ada.username) / "HEARTBEAT.md").write_text(OPEN_TASK)
    settings.AGENT_HEARTBEAT_INTERVAL = 600
    ensure_schedules()
    # A beat already due, and the one it would queue for ada, waiting for the worker.
    due = async_task(jobs.RUN_HEARTBEAT, task_name="heartbeat (due)")
    queued = async_task(jobs.RUN_USER_HEARTBEAT, ada.pk, task_name="beat-ada")

    with cluster({**env, "AGENT_HEARTBEAT_INTERVAL": "0"}) as worker:
        wait_for(lambda: heartbeat_schedule() is None, what="the schedule to be deleted")
        done = wait_for(
            lambda: Success.objects.filter(id__in=[due, queued]).count() == 2,
            what="the due beats to run",
        )
        stop(worker)
    assert done
    assert set(Success.objects.values_list("result", flat=True)) == {"off"}
    assert llm.requests == []


@pytest.mark.usefixtures("agent_settings")
def test_a_beat_does_nothing_while_the_heartbeat_is_off(
    workspace: Path, llm: ScriptedLLM, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ada = User.objects.create_user("ada", password="pw-ada-123")
    (folder_of(workspace, ada.username) / "HEARTBEAT.md").write_text(OPEN_TASK)
    queue = hold_queue(monkeypatch)
    settings.AGENT_HEARTBEAT_INTERVAL = 0

    assert run_heartbeat() == "off"
    assert run_user_heartbeat(ada.pk) == "off"
    assert queue.jobs == [] and llm.requests == []

    settings.AGENT_HEARTBEAT_INTERVAL = 1800
    assert run_heartbeat() == "1 heartbeat(s) queued"


def test_the_heartbeat_command_runs_one_beat_by_hand(
    env: dict[str, str], workspace: Path, llm: ScriptedLLM
) -> None:
    ada = User.objects.create_user("ada", password="pw-ada-123")
    heartbeat_off = {**env, "AGENT_HEARTBEAT_INTERVAL": "0"}  # off: by hand it runs all the same

    idle = run_manage(heartbeat_off, "heartbeat")
    assert idle.returncode == 0, idle.stderr
    assert idle.stdout.startswith("Nothing to do")

    (folder_of(workspace, ada.username) / "HEARTBEAT.md").write_text(OPEN_TASK)
    llm.reply("Water the plants today.")
    done = run_manage(heartbeat_off, "heartbeat", "--user", "ada")

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ada: ")
    [request] = llm.requests
    assert "water the plants" in request["messages"][-1]["content"]

    unknown = run_manage(heartbeat_off, "heartbeat", "--user", "nobody")
    assert unknown.returncode != 0 and "nobody" in unknown.stderr
