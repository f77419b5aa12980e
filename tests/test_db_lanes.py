"""On PostgreSQL the turn's database calls run side by side, each lane with a connection of
its own, and a connection the database dropped is replaced without failing the call."""

from __future__ import annotations

import asyncio
import time

import pytest
from asgiref.sync import sync_to_async
from django.db import connection

from agent.turn.db import on_db

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql",
        reason="on the SQLite default, with its single writer, calls stay on one thread "
        "by design (the second CI pass runs these on PostgreSQL)",
    ),
]


def _sleep_then_pid(seconds: float) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_sleep(%s), pg_backend_pid()", [seconds])
        row = cursor.fetchone()
    assert row is not None
    return int(row[1])


sleep_then_pid = on_db(_sleep_then_pid)


def terminate(pid: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])


async def test_slow_calls_of_two_conversations_run_side_by_side() -> None:
    started = time.monotonic()
    first, second = await asyncio.gather(sleep_then_pid(0.5), sleep_then_pid(0.5))
    assert time.monotonic() - started < 0.9  # one thread would take a second
    assert first != second  # two connections


async def test_a_connection_the_database_dropped_is_replaced_without_failing_the_call() -> None:
    dropped = await sleep_then_pid(0)
    await sync_to_async(terminate)(dropped)
    await asyncio.sleep(0.2)

    again = await sleep_then_pid(0)  # the same lane, whose connection is gone

    assert again != dropped
