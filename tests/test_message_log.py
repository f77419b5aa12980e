"""The turn's message log: writes queued in order and in batches, failures surfaced,
nothing lost."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async

from agent.turn import store
from agent.turn.message_log import MessageLog
from sessions_app import runs as run_records
from sessions_app import services
from sessions_app.models import Message, Run, Session
from sessions_app.services import NewMessage, SessionDeleted

pytestmark = pytest.mark.django_db(transaction=True)


@sync_to_async
def new_run() -> tuple[Session, Run]:
    session = services.get_or_create_session(key="cli:log", owner=None)
    run = run_records.start_new_run(session=session, channel="cli", prompt="p", model="m")
    return session, run


def result(index: int) -> dict[str, str]:
    return {
        "role": "tool",
        "tool_call_id": f"c{index}",
        "name": "read_file",
        "content": f"m{index}",
    }


@sync_to_async
def saved_contents() -> list[str | None]:
    return list(Message.objects.order_by("id").values_list("content", flat=True))


async def test_messages_are_saved_in_the_order_they_were_handed_over() -> None:
    session, run = await new_run()
    log = MessageLog(session, run)
    for index in range(40):
        await log.add(result(index), None)
    await log.flush()
    assert await saved_contents() == [f"m{index}" for index in range(40)]


async def test_what_arrives_during_a_write_is_saved_in_the_next_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    session, run = await new_run()
    batches: list[int] = []
    add_messages = store.add_messages

    async def counted(**kwargs: object) -> None:
        batches.append(len(kwargs["messages"]))  # type: ignore[arg-type]
        await add_messages(**kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "add_messages", counted)
    log = MessageLog(session, run)
    for index in range(40):
        await log.add(result(index), None)
    await log.flush()
    assert batches == [40]  # handed over before the writer's first turn: one transaction
    await log.add(result(40), None)
    await log.flush()
    assert batches == [40, 1]
    assert await saved_contents() == [f"m{index}" for index in range(41)]


async def test_the_answer_is_held_for_the_runs_ending() -> None:
    session, run = await new_run()
    log = MessageLog(session, run)
    await log.add(result(0), None)
    await log.add({"role": "assistant", "content": "done"}, {"total_tokens": 3})
    held = await log.held()
    assert held == [NewMessage({"role": "assistant", "content": "done"}, {"total_tokens": 3}, 2)]
    assert await saved_contents() == ["m0"]
    await sync_to_async(run_records.finish_run)(
        run=run, status="succeeded", text="done", messages=held
    )
    assert await saved_contents() == ["m0", "done"]
    assert await log.held() == []


async def test_the_turn_goes_on_while_its_messages_are_written() -> None:
    session, run = await new_run()
    log = MessageLog(session, run)
    await log.add({"role": "user", "content": "hi"}, None)
    assert log.writer is not None and not log.writer.done()  # handed over, not yet written
    await log.flush()
    assert await saved_contents() == ["hi"]


async def test_writes_after_the_session_is_deleted_fail_and_say_so() -> None:
    session, run = await new_run()
    log = MessageLog(session, run)
    await log.add({"role": "user", "content": "kept"}, None)
    await log.flush()
    await sync_to_async(services.delete_session)(session=session)
    await log.add(result(1), None)
    with pytest.raises(SessionDeleted):
        await log.flush()
    with pytest.raises(SessionDeleted):
        await log.add(result(2), None)
    assert await saved_contents() == []


async def test_a_stop_during_flush_does_not_lose_the_write() -> None:
    session, run = await new_run()
    log = MessageLog(session, run)
    for index in range(10):
        await log.add(result(index), None)
    flushing = asyncio.ensure_future(log.flush())
    await asyncio.sleep(0)
    flushing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await flushing
    await log.flush()
    assert await saved_contents() == [f"m{index}" for index in range(10)]


@sync_to_async
def numbered() -> list[tuple[str | None, int | None]]:
    return list(Message.objects.order_by("id").values_list("content", "seq"))


async def test_a_runs_messages_are_numbered_from_its_first_in_the_order_handed_over() -> None:
    session, run = await new_run()
    log = MessageLog(session, run)
    await log.add({"role": "user", "content": "hi"}, None)
    for index in range(3):
        await log.add(result(index), None)
    await log.add({"role": "assistant", "content": "done"}, None)
    await sync_to_async(run_records.finish_run)(
        run=run, status="succeeded", text="done", messages=await log.held()
    )
    assert await numbered() == [("hi", 1), ("m0", 2), ("m1", 3), ("m2", 4), ("done", 5)]


@sync_to_async
def write_twice(batch: list[NewMessage]) -> None:
    session = services.get_or_create_session(key="cli:log", owner=None)
    run = run_records.start_new_run(session=session, channel="cli", prompt="p", model="m")
    # As `agent.turn.db` runs a write again when its connection died before the reply to
    # its commit came: the first write went through.
    services.add_messages(session=session, run=run, messages=batch)
    services.add_messages(session=session, run=run, messages=batch)
    run_records.finish_run(run=run, status="succeeded", text="done", messages=batch[-1:])


async def test_a_batch_written_twice_is_saved_once() -> None:
    batch = [
        NewMessage({"role": "user", "content": "hi"}, None, 1),
        NewMessage(result(0), None, 2),
        NewMessage({"role": "assistant", "content": "done"}, {"total_tokens": 3}, 3),
    ]
    await write_twice(batch)
    assert await numbered() == [("hi", 1), ("m0", 2), ("done", 3)]


@sync_to_async
def post_twice() -> None:
    session = services.get_or_create_session(key="cli:log", owner=None)
    post = NewMessage({"role": "assistant", "content": "a post"})
    services.add_messages(session=session, run=None, messages=[post])
    services.add_messages(session=session, run=None, messages=[post])


async def test_messages_of_no_run_have_no_number_and_are_each_saved() -> None:
    await post_twice()
    assert await numbered() == [("a post", None), ("a post", None)]
