"""One user's many due cron jobs in a real django-q2 cluster (`manage.py qcluster`, its
workers in processes of their own) call the scripted model no more often than the user's
turn rate allows, and processes without Redis count against one window."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from cron_app import services
from cron_app.models import CronJob
from sessions_app.models import Message
from tests.conftest import ROOT, clean_env
from tests.llm_server import ScriptedLLM
from tests.test_cron_live import logged_cluster
from tests.test_faults_workers import wait_for, worker_env  # noqa: F401  (a fixture)
from tests.test_ratelimit_atomic import HAMMER

pytestmark = pytest.mark.django_db(transaction=True)

RATE = 3
JOBS = 12


def test_many_due_jobs_of_one_user_call_the_model_only_as_often_as_the_rate(
    worker_env: dict[str, str],  # noqa: F811
    llm: ScriptedLLM,
    tmp_path: Path,
) -> None:
    worker_env["AGENT_TURN_RATE"] = f"{RATE}/min"
    # An id no other run counts turns for in a Redis the cluster may share with them.
    ada = User.objects.create_user("ada", password="pw-ada-123", id=random.randrange(10**6, 10**9))
    with logged_cluster(worker_env, tmp_path / "cluster.log"):
        for n in range(JOBS):
            services.create_job(
                owner=ada, message=f"job {n}", session=f"web:j{n}", kind="every", every_seconds=60
            )
        CronJob.objects.filter(owner=ada).update(next_run=timezone.now() + timedelta(seconds=1))
        done = CronJob.objects.filter(owner=ada, last_run__isnull=False)
        wait_for(lambda: done.count() == JOBS, what="every job's run to end", timeout=30)
        time.sleep(0.5)  # room for a model call past the rate, were there one

    assert len(llm.requests) == RATE
    jobs = CronJob.objects.filter(owner=ada)
    assert (
        sorted(job.last_status for job in jobs)
        == ["skipped"] * (JOBS - RATE) + ["succeeded"] * RATE
    )
    assert {job.last_error for job in jobs if job.last_status == "skipped"} == {
        f"skipped: ada is past their turn rate of {RATE}/min"
    }
    # Only the runs that happened reached their chats.
    delivered = Message.objects.filter(session__key__startswith="web:j", role="assistant")
    assert delivered.count() == RATE


def test_processes_without_redis_count_against_one_window(tmp_path: Path) -> None:
    """The web process and each worker process count a user's turns in one window: two
    processes taking at once, without Redis, together start no more than the rate."""
    limit = 25
    env = {
        **clean_env(),
        "DJANGO_SETTINGS_MODULE": "agentsite.settings",
        "AGENT_DATA_DIR": str(tmp_path / "data"),
        "REDIS_URL": "",
        "AGENT_TURN_RATE": f"{limit}/min",
    }
    start = time.time() + 4  # time enough for both to import Django
    hammers = [
        subprocess.Popen(
            [sys.executable, "-c", HAMMER, "7", str(start), "8", "10", f"{limit}/min"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = []
    for hammer in hammers:
        out, _ = hammer.communicate(timeout=60)
        assert hammer.returncode == 0
        results.append(json.loads(out))
    assert sum(result["allowed"] for result in results) == limit, results
    assert all(0 < wait <= 60 for result in results for wait in result["waits"])
