"""The run watcher of a real daphne process keeps working after the API request whose turn
started it has returned.

A task run with `wait` runs its turn on daphne's event loop from the view's thread
(`async_to_sync`). When that turn is the first on the loop, it starts the process's watcher;
a turn of a web chat that starts meanwhile is then watched by the same watcher, and a stop
seen only on its run record (a `/stop` from a process that shares no channel layer with
this one) must still reach it once the API request is over.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.db import connection

from sessions_app.models import Run
from tests.conftest import LOGIN, ROOT, free_port, login_token, wait_for_port
from tests.llm_server import ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)

API_ANSWER_DELAY = 1.5
STOP_WITHIN = 3.0


@pytest.fixture
def daphne(site_env: dict[str, str], tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A daphne serving the site, its standard error in a file; its base URL and that file."""
    env = {**site_env, "DJANGO_SUPERUSER_USERNAME": LOGIN[0], "DJANGO_SUPERUSER_PASSWORD": LOGIN[1]}
    subprocess.run([sys.executable, "manage.py", "ensure_login"], cwd=ROOT, env=env, check=True)
    port = free_port()
    log = tmp_path / "daphne.log"
    command = [sys.executable, "-m", "agentsite.web", "-v", "0", "-b", "127.0.0.1", "-p", str(port)]
    with log.open("wb") as sink:
        server = subprocess.Popen(
            [*command, "agentsite.asgi:application"], cwd=ROOT, env=env, stderr=sink
        )
    try:
        wait_for_port(port, server)
        yield f"http://127.0.0.1:{port}", log
    finally:
        server.terminate()
        server.wait(timeout=10)


T = TypeVar("T")


class SiteRecords:
    """The served site's database, as another process sees it: the test database on
    PostgreSQL, the site's own SQLite file otherwise."""

    def __init__(self, site_env: dict[str, str]) -> None:
        self.sqlite = None if "DATABASE_URL" in site_env else Path(site_env["AGENT_DATA_DIR"])

    def _execute(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        if self.sqlite is None:
            with connection.cursor() as cursor:
                cursor.execute(sql.replace("?", "%s"), params)
                return list(cursor.fetchall()) if cursor.description else []
        with sqlite3.connect(self.sqlite / "db.sqlite3", timeout=20, isolation_level=None) as db:
            return db.execute(sql, params).fetchall()

    def run_of(self, session_key: str) -> tuple[str, str] | None:
        """The session's run: its id as the database writes it, and its status."""
        rows = self._execute(
            "SELECT r.id, r.status FROM sessions_app_run r"
            " JOIN sessions_app_session s ON s.id = r.session_id WHERE s.key = ?",
            (session_key,),
        )
        return (rows[0][0], rows[0][1]) if rows else None

    def status(self, run_id: str) -> str:
        return self._execute("SELECT status FROM sessions_app_run WHERE id = ?", (run_id,))[0][0]

    def flag_stop(self, run_id: str) -> None:
        self._execute(
            "UPDATE sessions_app_run SET cancel_requested = ? WHERE id = ?", (True, run_id)
        )


async def until(condition: Callable[[], T], *, timeout: float, what: str) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = await sync_to_async(condition)()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def test_a_stop_on_the_record_reaches_a_chat_turn_after_an_api_task_returned(
    daphne: tuple[str, Path], site_env: dict[str, str], llm: ScriptedLLM
) -> None:
    import websockets

    base, log = daphne
    records = SiteRecords(site_env)
    token = login_token(site_env)
    llm.reply("The task's answer.", delay=API_ANSWER_DELAY)  # the API task's turn
    llm.hang(60)  # the chat's turn, which only a stop ends

    async with httpx.AsyncClient(
        base_url=base, headers={"Authorization": f"Token {token}"}, timeout=30
    ) as client:
        task = asyncio.create_task(
            client.post("/api/tasks", json={"prompt": "a slow task", "wait": True})
        )
        # The API task's turn is the loop's first: it starts the watcher.
        await until(lambda: len(llm.requests) >= 1, timeout=20, what="the task's model call")

        url = base.replace("http", "ws") + f"/ws/chat/late/?token={token}"
        async with websockets.connect(url, origin=base) as chat:
            assert json.loads(await chat.recv())["type"] == "history"
            await chat.send(json.dumps({"type": "message", "content": "keep going"}))
            await until(lambda: len(llm.requests) >= 2, timeout=10, what="the chat's model call")

            answered = await task
            assert answered.status_code == 200, answered.text
            assert answered.json()["status"] == "succeeded"
            # A few of the watcher's polls go by with the API request over.
            await asyncio.sleep(1.5)

            run = await sync_to_async(records.run_of)("web:late")
            assert run is not None and run[1] == Run.Status.RUNNING
            # A stop from a process that reaches this one through the database alone.
            await sync_to_async(records.flag_stop)(run[0])
            flagged = time.monotonic()
            status = Run.Status.RUNNING
            while status == Run.Status.RUNNING and time.monotonic() - flagged < STOP_WITHIN:
                await asyncio.sleep(0.05)
                status = await sync_to_async(records.status)(run[0])
            took = time.monotonic() - flagged

    logged = log.read_text(errors="replace")
    assert status == Run.Status.CANCELLED, f"still {status} after {took:.1f} s:\n{logged[-4000:]}"
    assert "could not poll" not in logged, logged[-4000:]
    assert "CurrentThreadExecutor" not in logged, logged[-4000:]
