"""A turn whose session lock PostgreSQL dropped mid-way (its connection's backend was
terminated: a restart, a failover, an operator) takes the lock again and goes on if no one
else took it meanwhile; if another turn of the session did, it stops at once and saves
nothing more, and the other turn runs alone. Two turns of a session never call the model at
the same time."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.db import connection, connections

from agent.llm.client import LLM, _limits
from agent.turn import locks, run_turn
from agent.turn.closing import LOST_LOCK_TEXT
from agent.turn.locks import ADVISORY_LOCK_CLASS
from sessions_app import services
from sessions_app.models import Message, Run
from tests.conftest import ROOT
from tests.llm_server import ScriptedLLM, _last_user_text

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("agent_settings"),
    pytest.mark.skipif(
        connection.vendor != "postgresql",
        reason="the embedded SQLite locks a session with a file, which its process holds until "
        "it ends (the second CI pass runs these on PostgreSQL)",
    ),
]

KEY = "cli:lost-lock"
SECOND = """
import asyncio
from agent.turn import run_turn

result = asyncio.run(run_turn({key!r}, "second", channel="cli"))
print(result.status, result.text, sep="|", flush=True)
"""


class OverlapWatch(ScriptedLLM):
    """The scripted model, noting for each request of the other process's turn (the one
    saying "second") how many model calls this process's turn had open as it arrived."""

    def __init__(self) -> None:
        self.calls_here = 0
        self.open_here_when_second_called: list[int] = []
        super().__init__()

    def _next_step(self, body: dict[str, Any]) -> Any:
        if _last_user_text(body) == "second":
            self.open_here_when_second_called.append(self.calls_here)
        return super()._next_step(body)


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch) -> Iterator[OverlapWatch]:
    _limits.clear()
    with OverlapWatch() as server:
        stream = LLM.stream

        async def counted(self: LLM, *args: Any, **kwargs: Any) -> Any:
            server.calls_here += 1
            try:
                return await stream(self, *args, **kwargs)
            finally:
                server.calls_here -= 1

        monkeypatch.setattr(LLM, "stream", counted)
        yield server


@sync_to_async
def _session_id() -> int:
    return services.get_or_create_session(key=KEY, owner=None).pk


@sync_to_async
def _lock_holders(session_id: int) -> list[int]:
    """The backends holding the session's advisory lock (in this database: other test
    databases of the server have sessions of the same number)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = %s "
            "AND objid = %s AND granted "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            [ADVISORY_LOCK_CLASS, session_id],
        )
        return [row[0] for row in cursor.fetchall()]


@sync_to_async
def _named(pid: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT application_name FROM pg_stat_activity WHERE pid = %s", [pid])
        return str(cursor.fetchone()[0])


@sync_to_async
def _terminate(pid: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])


async def _held_by_another_than(session_id: int, pid: int, *, within: float) -> int:
    deadline = time.monotonic() + within
    while True:
        holders = [holder for holder in await _lock_holders(session_id) if holder != pid]
        if holders:
            return holders[0]
        assert time.monotonic() < deadline, "no one holds the session's lock"
        await asyncio.sleep(0.05)


async def _until(condition: Any, *, within: float = 10) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)


@sync_to_async
def _saved() -> list[tuple[str, str, int | None, str]]:
    return [
        (m.role, m.content, m.seq, m.run.prompt if m.run else "")
        for m in Message.objects.filter(session__key=KEY).select_related("run").order_by("id")
    ]


@sync_to_async
def _runs() -> dict[str, tuple[str, str | None]]:
    return {run.prompt: (run.status, run.error) for run in Run.objects.filter(session__key=KEY)}


async def test_a_turn_whose_lock_was_dropped_takes_it_again_and_ends_well(
    llm: OverlapWatch,
) -> None:
    session_id = await _session_id()
    llm.tool_call("write_file", {"path": "notes.txt", "content": "kept"})
    # The second call streams for about three seconds.
    llm.reply("All written down, " + "and then some. " * 11, chunks=12, chunk_delay=0.25)
    turn = asyncio.create_task(run_turn(KEY, "first", channel="cli"))
    await _until(lambda: len(llm.requests) == 2 and llm.calls_here == 1)
    (holder,) = await _lock_holders(session_id)
    assert await _named(holder) == locks.lock_connection_name()

    await _terminate(holder)

    # Taken again by a new connection while the model is still answering.
    await _held_by_another_than(session_id, holder, within=2)
    assert not turn.done() and llm.calls_here == 1
    result = await asyncio.wait_for(turn, 15)
    assert result.success, result.text
    assert result.text.startswith("All written down")
    saved = await _saved()
    assert [(role, seq) for role, _, seq, _ in saved] == [
        ("user", 1),
        ("assistant", 2),
        ("tool", 3),
        ("assistant", 4),
    ]
    assert saved[-1][1] == result.text
    assert await _runs() == {"first": ("succeeded", None)}
    assert await _lock_holders(session_id) == []


async def test_a_turn_whose_lock_went_to_another_turn_stops_and_saves_nothing_more(
    llm: OverlapWatch, site_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id = await _session_id()
    llm.reply("first, at length " * 40, chunks=40, chunk_delay=0.25)  # ten seconds
    llm.reply("second answer")
    first = asyncio.create_task(run_turn(KEY, "first", channel="cli"))
    await _until(lambda: llm.calls_here == 1)
    await _until(lambda: len(llm.requests) == 1)
    (holder,) = await _lock_holders(session_id)

    # This process gets back into the database only once the other process's turn holds
    # the lock (as when the database comes back and lets that one in first).
    connect = locks._connect

    async def late(*args: Any, **kwargs: Any) -> Any:
        await _held_by_another_than(session_id, holder, within=30)
        return await connect(*args, **kwargs)

    monkeypatch.setattr(locks, "_connect", late)
    code = SECOND.format(key=KEY)
    command = [sys.executable, "manage.py", "shell", "--no-imports", "-c", code]
    second = await asyncio.create_subprocess_exec(
        *command, cwd=ROOT, env=site_env, stdout=asyncio.subprocess.PIPE
    )
    try:
        await _terminate(holder)
        result = await asyncio.wait_for(first, 30)
        out, _ = await asyncio.wait_for(second.communicate(), 60)
    finally:
        if second.returncode is None:
            second.kill()
            await second.wait()

    assert second.returncode == 0
    assert out.decode().strip() == "succeeded|second answer"
    assert result.status == "failed" and result.error_kind == "lost_lock"
    assert result.text == LOST_LOCK_TEXT
    # The other turn called the model once, and only once this one had stopped calling it.
    assert llm.open_here_when_second_called == [0]
    assert len(llm.requests) == 2
    # Of the first turn, only what it saved before its lock was lost: not the part of its
    # answer it was cut off in.
    assert [(role, content, prompt) for role, content, _, prompt in await _saved()] == [
        ("user", "first", "first"),
        ("user", "second", "second"),
        ("assistant", "second answer", "second"),
    ]
    runs = await _runs()
    assert runs["first"][0] == "failed" and runs["second"] == ("succeeded", None)


@sync_to_async
def _lock_connections(within: float = 3.0) -> list[tuple[Any, ...]]:
    """This process's open connections for session locks (as pg_stat_activity has them). A
    backend leaves the list a moment after its client closed, not at once: a closed
    connection is given `within` seconds to go, a leaked one stays. (Another process's, such
    as the one the test before ran, may still be going: they are not this process's.)"""
    deadline = time.monotonic() + within
    while True:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid, backend_start, state, query FROM pg_stat_activity "
                "WHERE datname = current_database() AND application_name = %s",
                [locks.lock_connection_name()],
            )
            found = cursor.fetchall()
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


async def test_a_turn_run_from_sync_code_leaves_no_lock_connection_or_keeper_behind(
    llm: OverlapWatch,
) -> None:
    async def turn_and_what_is_left() -> tuple[str, Any]:
        result = await run_turn(KEY, "from a worker", channel="cli")
        holder = locks._holders[asyncio.get_running_loop()]
        return result.status, (holder.conn, holder.keeper, holder.held)

    def worker() -> tuple[str, Any]:
        # As a worker's task runs its turn: on a loop of its own, which ends with it.
        try:
            return async_to_sync(turn_and_what_is_left)()
        finally:
            connections.close_all()

    for _ in range(2):
        status, left = await asyncio.to_thread(worker)
        assert status == "succeeded"
        assert left == (None, None, {})
    assert await _lock_connections() == []
