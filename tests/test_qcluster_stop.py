"""`manage.py qcluster` stops within 10 seconds of SIGTERM, whatever its workers are doing: a
turn that ends within the grace ends as usual, a longer one fails at once with a plain reason
(and its chat hears of it), and tasks it had taken but not started run at the next start.

Real clusters on the test's own database, the scripted model answering slowly or not at all.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.utils import timezone
from django_q.brokers import get_broker
from django_q.models import OrmQ, Success
from django_q.signing import SignedPackage
from django_q.tasks import async_task

from agent.doors import cluster as graceful
from agent.processes import alive
from agent.turn import submit_task
from cron_app import services as job_services
from cron_app.models import CronJob
from sessions_app import runs as run_records
from sessions_app.models import Message, Run
from sessions_app.runs import DIED_ERROR
from tests.jobs import cluster
from tests.llm_server import ScriptedLLM
from tests.test_faults import assert_plain
from tests.test_faults_workers import wait_for, worker_env  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]


@pytest.fixture
def env(request: pytest.FixtureRequest) -> dict[str, str]:
    """The environment of a cluster that uses the scripted model and this test's database."""
    return dict(request.getfixturevalue("worker_env"))


LIMIT = 10.0


def started() -> None:
    """Wait for the cluster to run a task: its workers are up."""
    task = async_task("math.floor", 1.5, task_name="ready?")
    wait_for(lambda: Success.objects.filter(id=task).exists(), what="the cluster to start")


def stop_in_time(worker: subprocess.Popen[bytes], *, group: bool = False) -> float:
    """SIGTERM (to the cluster's process, or its whole group as a service manager sends it);
    how long until every process of it ended."""
    began = time.monotonic()
    if group:
        os.killpg(worker.pid, signal.SIGTERM)
    else:
        worker.send_signal(signal.SIGTERM)
    worker.wait(timeout=30)
    while group_alive(worker.pid):
        assert time.monotonic() - began < 30, "the cluster's processes outlived it"
        time.sleep(0.05)
    return time.monotonic() - began


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def no_task_left_in_the_broker() -> bool:
    if "orm" not in settings.Q_CLUSTER:
        return True  # Redis keeps no taken task: nothing of it can come back
    return not OrmQ.objects.exists()


def test_an_idle_cluster_stops_at_once(env: dict[str, str]) -> None:
    with cluster(env) as worker:
        started()
        took = stop_in_time(worker)
    assert worker.returncode == 0
    assert took < LIMIT


def test_a_turn_that_ends_within_the_grace_is_finished(
    env: dict[str, str], llm: ScriptedLLM
) -> None:
    ada = User.objects.create_user("ada", password="pw-ada-123")
    llm.reply("Done thinking.", chunks=4, chunk_delay=0.3)
    with cluster(env) as worker:
        run = submit_task(user=ada, prompt="think", wait=False)
        wait_for(lambda: llm.requests, what="the turn's model call")
        took = stop_in_time(worker)
    run.refresh_from_db()
    assert (run.status, run.text) == ("succeeded", "Done thinking.")
    assert took < LIMIT
    assert no_task_left_in_the_broker()


@pytest.mark.parametrize("group", [False, True], ids=["the cluster", "its process group"])
def test_a_long_turn_fails_plainly_at_once_and_does_not_run_again(
    env: dict[str, str], llm: ScriptedLLM, group: bool
) -> None:
    ada = User.objects.create_user("ada", password="pw-ada-123")
    llm.hang(60)
    with cluster(env) as worker:
        run = submit_task(user=ada, prompt="think for a long time", wait=False)
        wait_for(lambda: llm.requests, what="the turn's model call")
        took = stop_in_time(worker, group=group)
    assert took < LIMIT
    run.refresh_from_db()
    assert (run.status, run.error) == ("failed", DIED_ERROR)
    assert_plain(run.text)
    assert no_task_left_in_the_broker()


def test_a_cron_run_cut_short_is_reported_in_its_chat(
    env: dict[str, str], llm: ScriptedLLM
) -> None:
    ada = User.objects.create_user("ada", password="pw-ada-123")
    job = job_services.create_job(
        owner=ada, message="Brief me", session="web:inbox", kind="every", every_seconds=3600
    )
    llm.hang(60)
    with cluster(env) as worker:
        CronJob.objects.filter(pk=job.pk).update(next_run=timezone.now())
        wait_for(lambda: llm.requests, what="the job's model call")
        took = stop_in_time(worker)
    assert took < LIMIT
    job.refresh_from_db()
    assert (job.last_status, job.enabled) == ("failed", True)
    [told] = Message.objects.filter(session__key="web:inbox").values_list("content", flat=True)
    assert "'Brief me'" in told and DIED_ERROR in told
    assert_plain(told)


def test_tasks_it_took_but_never_started_run_at_the_next_start(
    env: dict[str, str], llm: ScriptedLLM
) -> None:
    ada = User.objects.create_user("ada", password="pw-ada-123")
    one_worker = {**env, "AGENT_WORKERS": "1"}
    llm.hang(60)
    with cluster(one_worker) as worker:
        first = submit_task(user=ada, prompt="think for a long time", wait=False)
        wait_for(lambda: llm.requests, what="the first turn's model call")
        # Taken by the cluster into its own queue, behind the busy worker.
        second = submit_task(user=ada, prompt="and then this", wait=False, session_key="api:2")
        time.sleep(1.5)
        took = stop_in_time(worker)
    assert took < LIMIT
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.status == "failed"
    assert second.status == "queued"

    llm.reply("Here it is.")
    with cluster(one_worker):
        wait_for(
            lambda: Run.objects.filter(pk=second.pk, status="succeeded").exists(),
            what="the second task to run at the next start",
        )
    assert len(llm.requests) == 2


def test_a_worker_told_to_stop_gives_the_task_it_takes_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a worker that is waiting for work does when the stop comes first: the task it
    then takes goes back to the broker, unstarted, and the worker ends."""
    broker = get_broker()
    broker.purge_queue()
    stopping = graceful.Stopping()
    stopping.request()
    monkeypatch.setattr(graceful, "_stopping", stopping)
    async_task("math.floor", 1.5, task_name="for the next start")
    [(ack_id, package)] = broker.dequeue()
    task = {**SignedPackage.loads(package), "ack_id": ack_id}

    with pytest.raises(SystemExit):
        graceful._on_execute(task=task)

    [(_, again)] = broker.dequeue()
    assert SignedPackage.loads(again)["name"] == "for the next start"


def test_a_turn_handed_back_stays_so_though_a_mark_of_life_was_on_its_way() -> None:
    ada = User.objects.create_user("ada", password="pw-ada-123")
    run = submit_task(user=ada, prompt="think", wait=False)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, last_alive=timezone.now())
    assert run_records.hand_back_runs(run_ids=[run.pk]) == 1
    run_records.mark_alive(run_ids=[run.pk])  # the turn's watcher, a moment late
    assert run_records.fail_dead_runs() == [run.pk]


def test_an_ended_worker_that_no_parent_reaped_is_not_waited_for() -> None:
    child = subprocess.Popen(["true"])
    wait_for(lambda: not alive(child.pid), what="the child to end")
    assert os.path.exists(f"/proc/{child.pid}")  # a zombie, still in the process table
    child.wait()
    assert alive(os.getpid())
