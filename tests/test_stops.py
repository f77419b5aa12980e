"""A stop asked for in one process reaches the turn in another at once, through the channel
layer (in-memory here, Redis in the second CI pass); the flag on its run record, which the
watcher polls, is the backstop."""

from __future__ import annotations

import asyncio
import time

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User

from agent.turn import SessionRef, run_turn
from agent.turn.watch import POLL_SECONDS, announce_stop
from sessions_app.models import Run
from tests.llm_server import ScriptedLLM

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]


async def running_run(key: str) -> Run:
    async with asyncio.timeout(10):
        while True:
            run = await sync_to_async(Run.objects.filter(session__key=key).first)()
            if run is not None and run.status == Run.Status.RUNNING:
                return run
            await asyncio.sleep(0.02)


async def test_a_stop_told_through_the_channel_layer_ends_the_turn_before_any_poll(
    llm: ScriptedLLM, ada: User
) -> None:
    llm.hang(30)
    turn = asyncio.create_task(run_turn(SessionRef("web:s1", ada), "wait", channel="web"))
    run = await running_run("web:s1")
    await asyncio.sleep(0.1)  # the watcher has joined the run's stop group

    told = time.monotonic()
    await announce_stop([run.pk])
    with pytest.raises(asyncio.CancelledError):  # a stopped turn's task ends cancelled
        await asyncio.wait_for(turn, 5)

    assert time.monotonic() - told < POLL_SECONDS * 0.8
    await sync_to_async(run.refresh_from_db)()
    # Nobody flagged the record: the channel layer alone stopped it.
    assert run.status == Run.Status.CANCELLED and not run.cancel_requested


async def test_a_stop_for_a_turn_that_is_over_is_harmless(llm: ScriptedLLM, ada: User) -> None:
    llm.reply("done").reply("again")
    result = await run_turn(SessionRef("web:s2", ada), "hi", channel="web")
    await announce_stop([await sync_to_async(lambda: Run.objects.get().pk)()])
    assert (await run_turn(SessionRef("web:s2", ada), "hi", channel="web")).success
    assert result.success
