"""A task's tool limit goes with everything it starts: a job its turn schedules records
the tools (`CronJob.tools`) and each run keeps to them; the turn that announces a spawned
sub-agent keeps to the sub-agent's, which are the task's."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone
from rest_framework.test import APIClient

from cron_app import dispatch
from cron_app.models import CronJob
from sessions_app.models import Run
from tests.jobs import hold_queue
from tests.llm_server import ScriptedLLM

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]


def tool_names(request: dict[str, Any]) -> list[str]:
    return sorted(tool["function"]["name"] for tool in request.get("tools") or [])


def fire(job: CronJob, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Make `job` due, let a dispatcher start it, and run its task as the worker would."""
    queue = hold_queue(monkeypatch)
    CronJob.objects.filter(pk=job.pk).update(next_run=timezone.now())
    assert dispatch.start_due() == 1
    return async_to_sync(queue.run_all)()


def test_a_job_a_limited_task_schedules_keeps_to_its_tools(
    api: APIClient, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm.tool_call("cron", {"action": "add", "message": "Read the log", "every_seconds": 3600})
    llm.reply("Scheduled.")
    body = {"prompt": "read the log hourly", "tools": ["cron", "read_file"]}
    task = api.post("/api/tasks", body, format="json").json()
    assert task["text"] == "Scheduled.", task
    job = CronJob.objects.get()
    assert job.tools == ["cron", "read_file"] and job.approve_tools == []

    llm.reply("The log is quiet.")
    assert fire(job, monkeypatch) == ["succeeded"]
    # The run's own kind of turn schedules nothing: of the task's tools, read_file is left.
    assert tool_names(llm.requests[-1]) == ["read_file"]
    assert Run.objects.get(channel="cron").tools == ["cron", "read_file"]


def test_the_turn_announcing_a_limited_tasks_sub_agent_keeps_to_its_tools(
    api: APIClient, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = hold_queue(monkeypatch)
    llm.tool_call("spawn", {"task": "Think it over", "label": "thinker"}).reply("Started.")
    body = {"prompt": "think in the background", "tools": ["spawn"]}
    task = api.post("/api/tasks", body, format="json").json()
    assert task["text"] == "Started.", task

    llm.reply("Thought it over.")  # the sub-agent, offered none of them: spawn is not its
    llm.reply("The helper has thought it over.")  # the announcing turn, in the task's chat
    assert async_to_sync(queue.run_all)() == ["succeeded"]
    sub, told = llm.requests[2:4]
    assert tool_names(sub) == []
    assert tool_names(told) == ["spawn"]
    announced = Run.objects.get(channel="system")
    assert announced.session.key == task["session"] and announced.tools == ["spawn"]
    assert announced.status == "succeeded"
