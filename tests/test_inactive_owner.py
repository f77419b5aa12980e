"""Nothing runs for a deactivated account: not a cron job of theirs, not a sub-agent or any
other turn that was recorded for them before (here deactivated behind every signal's back,
as a queryset update or raw SQL would, so that only the turn's own check stands)."""

from __future__ import annotations

import asyncio
import time

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User

from agent.turn import SessionRef, run_turn
from cron_app import services
from cron_app.models import CronJob
from sessions_app.models import Message, Run
from tests.jobs import hold_queue
from tests.llm_server import ScriptedLLM

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]

EVERY = {"message": "Any news?", "session": "web:news", "kind": "every", "every_seconds": 3600}


@pytest.fixture
def ada(db: None) -> User:
    return User.objects.create_user("ada", password="pw")


def deactivate_quietly(user: User) -> None:
    User.objects.filter(pk=user.pk).update(is_active=False)


async def test_a_cron_job_of_a_deactivated_account_is_skipped_and_asks_no_model(
    llm: ScriptedLLM, ada: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = hold_queue(monkeypatch)
    job = await sync_to_async(services.create_job)(owner=ada, **EVERY)
    await sync_to_async(deactivate_quietly)(ada)
    await sync_to_async(services.run_now)(job=job)

    assert await queue.run_all() == ["limited"]
    assert llm.requests == []
    job = await sync_to_async(CronJob.objects.get)(pk=job.pk)
    assert job.last_status == "skipped"
    assert job.last_error == "skipped: the account 'ada' is deactivated; nothing runs for it"
    assert not await sync_to_async(Message.objects.filter(session__key="web:news").exists)()


async def test_a_sub_agent_queued_before_the_deactivation_does_not_run(
    llm: ScriptedLLM, ada: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = hold_queue(monkeypatch)
    llm.tool_call("spawn", {"task": "look around", "label": "scout"}).reply("On it.")
    await run_turn(SessionRef("web:a1", ada), "send a scout", channel="web")
    asked = len(llm.requests)

    await sync_to_async(deactivate_quietly)(ada)
    await queue.run_all()

    assert len(llm.requests) == asked  # neither the sub-agent nor its announcement
    run = await sync_to_async(Run.objects.get)(channel="subagent")
    assert run.status == "failed"
    assert run.error == "the account 'ada' is deactivated; nothing runs for it"


async def test_a_door_turn_of_a_deactivated_account_is_refused(ada: User) -> None:
    from agent.turn import TurnError

    await sync_to_async(deactivate_quietly)(ada)
    fresh = await sync_to_async(User.objects.get)(pk=ada.pk)

    with pytest.raises(TurnError, match="is deactivated"):
        await run_turn(SessionRef("web:a1", fresh), "hello", channel="web")


async def test_a_running_turn_of_an_account_deactivated_quietly_stops(
    llm: ScriptedLLM, ada: User
) -> None:
    """With no signal there was no stop: a turn already running went on to its end."""
    llm.tool_call("exec", {"command": "sleep 30"}).reply("never sent")
    turn = asyncio.create_task(run_turn(SessionRef("web:busy", ada), "work", channel="web"))
    while not llm.requests:
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.3)  # the command has started

    started = time.monotonic()
    await sync_to_async(deactivate_quietly)(ada)
    with pytest.raises(asyncio.CancelledError):
        await turn

    assert time.monotonic() - started < 5
    assert len(llm.requests) == 1
    run = await sync_to_async(Run.objects.get)(session__key="web:busy")
    assert run.status == "cancelled"
