"""The dispatcher when a job or the broker fails: a job whose next run cannot be computed is
disabled with why, once; a broker that is down is logged once a look, and not hammered."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from agent.job_functions import fail_dead_runs
from cron_app import dispatch, services
from cron_app.models import CronJob
from tests.jobs import hold_queue

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]


@pytest.fixture
def ada(db: None) -> User:
    return User.objects.create_user("ada", password="pw")


def errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name.startswith("cron_app") and record.levelno >= logging.ERROR
    ]


@pytest.mark.parametrize(
    ("broken", "said"),
    [
        ({"tz": "Mars/Olympus"}, "unknown time zone 'Mars/Olympus'"),
        ({"cron_expr": "61 * * * *"}, "[61 * * * *] is not acceptable"),
        ({"kind": "every", "every_seconds": 0}, "division by zero"),
    ],
)
def test_a_job_whose_next_run_cannot_be_computed_is_disabled_with_why_once(
    ada: User,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    broken: dict[str, Any],
    said: str,
) -> None:
    """Its time zone gone from the system, or its fields changed behind validation's back:
    no later look would do better, so neither the dispatchers nor the sweep try it again."""
    queue = hold_queue(monkeypatch)
    job = services.create_job(
        owner=ada, message="m", session="web:a", kind="cron", cron_expr="0 9 * * *", tz="UTC"
    )
    overdue = timezone.now() - timedelta(minutes=2)
    CronJob.objects.filter(pk=job.pk).update(next_run=overdue, **broken)
    read_twice = [CronJob.objects.get(pk=job.pk), CronJob.objects.get(pk=job.pk)]
    caplog.set_level(logging.INFO)

    assert [services.claim(job=seen, now=timezone.now()) for seen in read_twice] == [None, None]
    fail_dead_runs()  # the sweep, which starts long overdue jobs
    dispatcher = dispatch.Dispatcher()
    assert dispatcher.step() == dispatcher.poll
    assert dispatcher.step() == dispatcher.poll

    job = CronJob.objects.get(pk=job.pk)
    assert (job.enabled, job.next_run, job.last_status) == (False, None, "failed")
    assert job.last_error.startswith("disabled: its next run could not be computed (")
    assert said in job.last_error
    assert errors(caplog) == [f"cron job {job.pk} is {job.last_error}"]
    assert queue.jobs == []

    job = services.update_job(job=job, kind="cron", cron_expr="0 9 * * *", tz="Europe/Paris")
    job = services.set_enabled(job=job, enabled=True)
    assert job.next_run is not None and job.next_run > timezone.now()


def test_a_broker_that_is_down_is_logged_once_a_look_and_not_hammered(
    ada: User, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """More jobs due than a look takes, none of which can be queued: the dispatcher waits
    its poll before looking again, rather than reading the same jobs in a tight loop."""
    monkeypatch.setattr(dispatch, "BATCH", 3)
    tries: list[tuple[Any, ...]] = []

    def refuse(*args: Any, **kwargs: Any) -> str:
        tries.append(args)
        raise ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr("django_q.tasks.async_task", refuse)
    for _ in range(4):
        services.create_job(owner=ada, message="m", session="web:a", kind="every", every_seconds=60)
    due = timezone.now() - timedelta(seconds=5)
    CronJob.objects.update(next_run=due)

    dispatcher = dispatch.Dispatcher(poll=0.5)
    assert dispatcher.step() == 0.5
    assert len(tries) == 1
    [logged] = errors(caplog)
    assert logged.startswith("could not queue cron job") and "2 more due" in logged
    assert set(CronJob.objects.values_list("next_run", "enabled")) == {(due, True)}

    queue = hold_queue(monkeypatch)  # the broker back
    assert dispatcher.step() == 0.0  # a full batch started: the rest at once
    assert dispatcher.step() == 0.5
    assert queue.names() == ["run_cron_job"] * 4
