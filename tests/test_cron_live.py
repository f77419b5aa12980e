"""Cron jobs started by real django-q2 clusters (`manage.py qcluster`, each with its
dispatcher) against the scripted model: on time, once however many clusters run, and with
the worker's sweep beside the run finding nothing to mend.

The clusters share the test's own database (the SQLite file or the PostgreSQL database)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from django_q.tasks import async_task, result

from agent import jobs
from cron_app import services
from cron_app.models import CronJob
from sessions_app.models import Message, Run
from tests.conftest import ROOT
from tests.jobs import kill
from tests.llm_server import ScriptedLLM
from tests.test_faults_workers import wait_for, worker_env  # noqa: F401  (a fixture)

pytestmark = pytest.mark.django_db(transaction=True)


@contextmanager
def logged_cluster(env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A cluster whose log goes to `log`, up (it has run a task) when this yields; killed
    at the end, having nothing left to do that the tests check."""
    with log.open("ab") as sink:
        worker = subprocess.Popen(
            [sys.executable, "manage.py", "qcluster"],
            cwd=ROOT,
            env=env,
            stdout=sink,
            stderr=sink,
            start_new_session=True,
        )
    try:
        assert result(async_task("time.time"), wait=60_000) is not None, log.read_text()
        yield worker
    finally:
        if worker.poll() is None:
            kill(worker)


class Arrivals:
    """When each request reached the scripted model, noted by a thread that watches it."""

    def __init__(self, llm: ScriptedLLM) -> None:
        self.llm = llm
        self.times: list[float] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> Arrivals:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._done.is_set():
            while len(self.times) < len(self.llm.requests):
                self.times.append(time.time())
            time.sleep(0.005)


def answers(key: str) -> list[str]:
    return list(
        Message.objects.filter(session__key=key, role="assistant").values_list("content", flat=True)
    )


def test_a_job_due_in_three_seconds_replies_in_time(
    worker_env: dict[str, str],  # noqa: F811
    llm: ScriptedLLM,
    tmp_path: Path,
) -> None:
    ada = User.objects.create_user("ada", password="pw-ada-123")
    llm.reply("Time to stretch.")
    with logged_cluster(worker_env, tmp_path / "cluster.log"), Arrivals(llm) as arrivals:
        made = time.monotonic()
        due = timezone.now() + timedelta(seconds=3)
        job = services.create_job(
            owner=ada, message="Remind me to stretch", session="web:inbox", kind="at", at=due
        )
        wait_for(lambda: answers("web:inbox"), what="the job's answer", timeout=8)
        assert time.monotonic() - made < 8
    assert answers("web:inbox") == ["Time to stretch."]
    # The model heard of it within a second of its time, not before.
    [arrived] = arrivals.times
    assert 0 <= arrived - due.timestamp() < 1.0, arrived - due.timestamp()
    job.refresh_from_db()
    assert (job.enabled, job.next_run, job.last_status) == (False, None, "succeeded")


def test_two_clusters_start_each_due_run_once(
    worker_env: dict[str, str],  # noqa: F811
    llm: ScriptedLLM,
    tmp_path: Path,
) -> None:
    ada = User.objects.create_user("ada", password="pw-ada-123")
    with ExitStack() as clusters:
        for n in range(2):
            clusters.enter_context(logged_cluster(worker_env, tmp_path / f"cluster-{n}.log"))
        due = timezone.now() + timedelta(seconds=2)
        jobs = [
            services.create_job(
                owner=ada, message=f"job {n}", session=f"web:j{n}", kind="at", at=due
            )
            for n in range(4)
        ]
        every = services.create_job(
            owner=ada, message="every", session="web:every", kind="every", every_seconds=30
        )
        CronJob.objects.filter(pk=every.pk).update(next_run=due)
        keys = [f"web:j{n}" for n in range(4)] + ["web:every"]
        wait_for(lambda: all(answers(key) for key in keys), what="every job's answer", timeout=10)
        time.sleep(2)  # room for a second start, were there one
    for job in [*jobs, every]:
        assert Run.objects.filter(session__key=f"cron:{job.pk}").count() == 1
    assert len(llm.requests) == 5
    assert CronJob.objects.get(pk=every.pk).next_run == due + timedelta(seconds=30)


def test_the_sweep_beside_a_run_finds_no_job_to_mend(
    worker_env: dict[str, str],  # noqa: F811
    llm: ScriptedLLM,
    tmp_path: Path,
) -> None:
    """The sweep used to read the jobs' schedules and then each job: a run planning its
    job's next time in between made the job look as if it had lost its schedule, and the
    worker logged that it put it back. Now the claim that starts a run plans the next one
    in the same statement, and there is no schedule of a job to lose."""
    ada = User.objects.create_user("ada", password="pw-ada-123")
    log = tmp_path / "cluster.log"
    llm.reply("Done.", delay=1.0)
    with logged_cluster(worker_env, log):
        due = timezone.now() + timedelta(seconds=1)
        job = services.create_job(
            owner=ada, message="m", session="web:inbox", kind="every", every_seconds=30
        )
        CronJob.objects.filter(pk=job.pk).update(next_run=due)
        wait_for(lambda: llm.requests, what="the run to start")
        sweeps = [async_task(jobs.FAIL_DEAD_RUNS) for _ in range(3)]
        wait_for(lambda: answers("web:inbox"), what="the job's answer")
        assert [result(task, wait=10_000) for task in sweeps] == [0, 0, 0]
    text = log.read_text()
    assert "put back" not in text and "overdue cron job" not in text, text
    job.refresh_from_db()
    assert job.next_run == due + timedelta(seconds=30) and job.last_status == "succeeded"
