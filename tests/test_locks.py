"""The session lock holds across processes (on PostgreSQL, across hosts: it is an advisory
lock of the database's), and a process that dies holding it does not keep it."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection

from agent.turn.locks import ADVISORY_LOCK_CLASS, session_lock
from tests.conftest import ROOT

pytestmark = pytest.mark.django_db(transaction=True)

SESSION_ID = 4242
HOLDER = """
import asyncio, sys
from pathlib import Path
from agent.turn.locks import session_lock

async def main():
    async with session_lock({session}, lock_dir=Path({lock_dir!r})):
        print("held", flush=True)
        await asyncio.sleep({hold})
    print("released", flush=True)

asyncio.run(main())
"""


@pytest.fixture
def holder(site_env: dict[str, str], tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the session's lock for 1.5 s (then releasing it)."""
    code = HOLDER.format(session=SESSION_ID, lock_dir=str(tmp_path / "locks"), hold=1.5)
    process = subprocess.Popen(
        [sys.executable, "manage.py", "shell", "--no-imports", "-c", code],
        cwd=ROOT,
        env=site_env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "held"
    yield process
    process.kill()
    process.wait()


async def test_a_turn_waits_while_another_process_holds_its_session(
    holder: subprocess.Popen[str], tmp_path: Path
) -> None:
    started = time.monotonic()
    async with session_lock(SESSION_ID, lock_dir=tmp_path / "locks"):
        waited = time.monotonic() - started
        # The other process let go before this one got in.
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "released"
    assert waited > 0.5


async def test_a_lock_whose_process_died_is_free_at_once(
    holder: subprocess.Popen[str], tmp_path: Path
) -> None:
    holder.kill()
    holder.wait()
    async with asyncio.timeout(2):
        async with session_lock(SESSION_ID, lock_dir=tmp_path / "locks"):
            pass


async def test_other_sessions_do_not_wait(holder: subprocess.Popen[str], tmp_path: Path) -> None:
    async with asyncio.timeout(0.5):
        async with session_lock(SESSION_ID + 1, lock_dir=tmp_path / "locks"):
            pass


@pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="the SQLite default locks with a file on the shared disk, as these tests show",
)
def test_on_postgresql_the_lock_is_the_databases_and_needs_no_shared_disk(
    holder: subprocess.Popen[str],
) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s "
            "AND objid = %s AND granted",
            [ADVISORY_LOCK_CLASS, SESSION_ID],
        )
        assert cursor.fetchone() == (1,)
