"""A turn's writes are fenced: only the session's current turn (the one that started last,
under the session's lock) saves messages. A turn that lost its lock and was overtaken by a
second one is refused, so that two turns' messages never interleave."""

from __future__ import annotations

import pytest

from sessions_app import runs as run_records
from sessions_app import services
from sessions_app.models import Message, Run, Session
from sessions_app.services import NewMessage, TurnSuperseded

pytestmark = pytest.mark.django_db(transaction=True)


def _session() -> Session:
    return services.get_or_create_session(key="cli:fenced", owner=None)


def _start(session: Session, prompt: str) -> Run:
    return run_records.start_new_run(session=session, channel="cli", prompt=prompt, model="m")


def _said(text: str, seq: int) -> NewMessage:
    return NewMessage({"role": "assistant", "content": text}, None, seq)


def test_starting_a_run_makes_it_the_sessions_current_turn() -> None:
    session = _session()
    first = _start(session, "one")
    assert Session.objects.get(pk=session.pk).turn == first.pk
    second = _start(session, "two")
    assert Session.objects.get(pk=session.pk).turn == second.pk


def test_a_superseded_turn_saves_no_message_and_its_successor_does() -> None:
    session = _session()
    first = _start(session, "one")
    services.add_messages(session=session, run=first, messages=[_said("first, early", 1)])
    second = _start(session, "two")

    with pytest.raises(TurnSuperseded):
        services.add_messages(session=session, run=first, messages=[_said("first, late", 2)])
    services.add_messages(session=session, run=second, messages=[_said("second", 1)])

    assert list(Message.objects.order_by("id").values_list("content", flat=True)) == [
        "first, early",
        "second",
    ]


def test_a_superseded_turns_ending_saves_nothing_and_leaves_the_run_as_it_was() -> None:
    session = _session()
    first = _start(session, "one")
    _start(session, "two")

    with pytest.raises(TurnSuperseded):
        run_records.finish_run(
            run=first, status="succeeded", text="late", messages=[_said("late", 1)]
        )

    assert not Message.objects.exists()
    assert Run.objects.get(pk=first.pk).status == Run.Status.RUNNING
    # Its record can still be closed, with nothing more said.
    run_records.finish_run(run=first, status="failed", text="overtaken")
    assert Run.objects.get(pk=first.pk).status == Run.Status.FAILED


def test_a_queued_run_becomes_the_current_turn_when_it_begins() -> None:
    session = _session()
    running = _start(session, "one")
    queued = run_records.queue_run(session=session, channel="api", prompt="two", model="m")
    assert Session.objects.get(pk=session.pk).turn == running.pk

    begun = run_records.start_queued_run(run_id=queued.pk, model="m")

    assert begun is not None
    assert Session.objects.get(pk=session.pk).turn == queued.pk
    with pytest.raises(TurnSuperseded):
        services.add_messages(session=session, run=running, messages=[_said("late", 1)])
    services.add_messages(session=session, run=begun, messages=[_said("queued", 1)])


def test_a_cancelled_queued_run_takes_no_turn() -> None:
    session = _session()
    running = _start(session, "one")
    queued = run_records.queue_run(session=session, channel="api", prompt="two", model="m")
    run_records.cancel_run(run_id=queued.pk)

    assert run_records.start_queued_run(run_id=queued.pk, model="m") is None
    assert Session.objects.get(pk=session.pk).turn == running.pk


# ---- a whole turn, overtaken -----------------------------------------------------------


async def _overtake(key: str) -> None:
    """Another turn of the session takes over, as one that got the lock this turn lost."""
    from uuid import uuid4

    from asgiref.sync import sync_to_async

    await sync_to_async(Session.objects.filter(key=key).update)(turn=uuid4())


@pytest.mark.usefixtures("agent_settings")
@pytest.mark.parametrize("when", ["mid-turn", "at its end"])
async def test_an_overtaken_turn_ends_failed_and_says_why(when: str, llm, ada) -> None:  # type: ignore[no-untyped-def]
    import asyncio

    from asgiref.sync import sync_to_async

    from agent.events import Collector
    from agent.turn import SessionRef, run_turn
    from agent.turn.closing import LOST_LOCK_TEXT

    key = f"web:overtaken-{when.replace(' ', '-')}"
    if when == "mid-turn":
        llm.tool_call("exec", {"command": "sleep 1"})
    llm.reply("the answer nobody should see", chunks=8, chunk_delay=0.1)
    events = Collector()
    turn = asyncio.create_task(run_turn(SessionRef(key, ada), "go", channel="web", emit=events))
    async with asyncio.timeout(10):
        while not events.of_type("tool_call" if when == "mid-turn" else "stream_chunk"):
            await asyncio.sleep(0.02)
    await _overtake(key)
    result = await asyncio.wait_for(turn, 15)

    assert result.status == Run.Status.FAILED and result.error_kind == "lost_lock"
    assert result.text == LOST_LOCK_TEXT
    assert events.of_type("thinking_finished")
    run = await sync_to_async(Run.objects.get)(session__key=key)
    assert run.status == Run.Status.FAILED and run.finished is not None
    said = await sync_to_async(list)(
        Message.objects.filter(session__key=key).values_list("content", flat=True)
    )
    assert "the answer nobody should see" not in said
