"""Runs that other work started link to it: a sub-agent's run to the run whose turn started
it, a cron run to its job; and each records its own trace."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.utils import timezone

from agent.turn import SessionRef, run_turn
from cron_app import dispatch, services
from cron_app.models import CronJob
from sessions_app.models import Run
from tests.jobs import hold_queue
from tests.llm_server import ScriptedLLM

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]


@pytest.fixture
def ada(db: None) -> User:
    return User.objects.create_user("ada", password="pw")


def steps(run: Run) -> list[tuple[str, str, str | None]]:
    return [(step["kind"], step["name"], step["error"]) for step in run.trace]


def runs() -> list[Run]:
    return list(Run.objects.order_by("created").select_related("parent_run", "cron_job"))


async def test_a_subagent_run_links_to_the_run_that_started_it(
    llm: ScriptedLLM, ada: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = hold_queue(monkeypatch)
    llm.tool_call("subagent", {"task": "List the folder", "label": "look"})
    llm.tool_call("list_dir", {"path": "."})  # the sub-agent's
    llm.reply("Nothing much.")  # the sub-agent's answer
    llm.reply("It found nothing much.")
    llm.tool_call("spawn", {"task": "Later", "label": "later"}).reply("Started.")
    await run_turn(SessionRef("web:a1", ada), "look around", channel="web")
    await run_turn(SessionRef("web:a1", ada), "and later", channel="web")

    first, inline, second, spawned = await sync_to_async(runs)()
    assert (inline.channel, spawned.channel) == ("subagent", "subagent")
    assert inline.parent_run == first and spawned.parent_run == second
    assert first.parent_run is None and first.cron_job is None
    assert steps(first) == [
        ("model", "openai/scripted", None),
        ("tool", "subagent", None),
        ("model", "openai/scripted", None),
    ]
    assert steps(inline) == [
        ("model", "openai/scripted", None),
        ("tool", "list_dir", None),
        ("model", "openai/scripted", None),
    ]
    # Its tool call took as long as the whole sub-agent's turn.
    assert first.trace[1]["ms"] >= sum(step["ms"] for step in inline.trace)
    assert queue.names() == ["run_subagent"]
    assert await sync_to_async(lambda: list(first.subagents.all()))() == [inline]


async def test_a_cron_run_links_to_its_job(
    llm: ScriptedLLM, ada: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = hold_queue(monkeypatch)
    job = await sync_to_async(services.create_job)(
        owner=ada, message="Tidy up", session="web:a1", kind="every", every_seconds=60
    )
    llm.reply("Tidy.")
    await sync_to_async(CronJob.objects.filter(pk=job.pk).update)(next_run=timezone.now())
    assert await sync_to_async(dispatch.start_due)() == 1
    assert await queue.run_all() == ["succeeded"]

    [run] = await sync_to_async(runs)()
    assert run.channel == "cron" and run.cron_job == job and run.parent_run is None
    assert steps(run) == [("model", "openai/scripted", None)]
    assert await sync_to_async(lambda: list(job.runs.all()))() == [run]
