"""PostgreSQL refusing connections for a moment (a restart, a failover, a full connection
table), when a turn starts and in the middle of one. The turn waits for the database, a few
seconds at most, and succeeds with nothing it said lost; an error of a query itself is not
asked again.

A proxy in front of PostgreSQL plays the database: it forwards connections, and when told
to, drops the open ones and refuses (closes at once) new ones for a while, or lets a commit
through and drops the connection before its reply reaches the client."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from asgiref.sync import SyncToAsync, sync_to_async
from django.contrib.auth.models import User
from django.db import OperationalError, connection, connections

from agent.turn import SessionRef, run_turn
from agent.turn.db import lanes, on_db
from sessions_app import selectors
from sessions_app.models import Message, Run, Session
from tests.llm_server import ScriptedLLM
from tests.test_faults import assert_valid_history

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("agent_settings"),
    pytest.mark.skipif(
        connection.vendor != "postgresql",
        reason="the embedded SQLite is a file, which refuses no connection (the second CI "
        "pass runs these on PostgreSQL)",
    ),
]


# PostgreSQL's CommandComplete message for a COMMIT: tag, length, "COMMIT" and its NUL.
COMMIT_REPLY = b"C\x00\x00\x00\x0bCOMMIT\x00"


@dataclass
class _Forwarded:
    """One client connection and what its current transaction has sent so far."""

    sent_tail: bytes = b""
    wrote: bool = False


class FlakyProxy:
    """A TCP proxy to `upstream` that can drop its connections and refuse new ones."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.05)
        self.port: int = self.listener.getsockname()[1]
        self.refused = 0
        self.lost_replies = 0
        self._lose_after: bytes | None = None
        self._then_refuse_for = 0.0
        self._refusing_until = 0.0
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="flaky-proxy", daemon=True)
        self._thread.start()

    def refuse_for(self, seconds: float) -> None:
        """Drop every open connection, and refuse new ones for `seconds`."""
        self._refusing_until = time.monotonic() + seconds
        with self._lock:
            gone, self._open = self._open, set()
        for sock in gone:
            _close(sock)

    def lose_commit_reply(self, *, after: bytes, then_refuse_for: float = 0.0) -> None:
        """Once: the first transaction to send `after` (a statement's beginning) commits,
        and its connection is dropped before the reply to the commit reaches the client,
        which cannot tell whether the commit happened. With `then_refuse_for`, the other
        connections go too and new ones are refused for that long, as in a restart."""
        self._lose_after = after
        self._then_refuse_for = then_refuse_for

    @property
    def refusing(self) -> bool:
        return time.monotonic() < self._refusing_until

    def close(self) -> None:
        self._closed.set()
        self._thread.join(timeout=5)
        self.listener.close()
        self.refuse_for(0)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            if self.refusing:
                self.refused += 1
                _close(client)
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                _close(client)
                continue
            server.settimeout(None)
            client.settimeout(None)
            with self._lock:
                self._open.update((client, server))
            forwarded = _Forwarded()
            for source, target in ((client, server), (server, client)):
                threading.Thread(
                    target=self._pump,
                    args=(source, target, forwarded, source is client),
                    daemon=True,
                ).start()

    def _pump(
        self, source: socket.socket, target: socket.socket, forwarded: _Forwarded, up: bool
    ) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if self._loses(data, forwarded, up=up):
                    break
                target.sendall(data)
        with self._lock:
            self._open.difference_update((source, target))
        _close(source)
        _close(target)

    def _loses(self, data: bytes, forwarded: _Forwarded, *, up: bool) -> bool:
        """Whether `data` is the reply to the commit to lose (it is then not forwarded)."""
        after = self._lose_after
        if after is None:
            return False
        if up:
            # Before the data goes on: the server's reply cannot overtake the mark.
            forwarded.wrote = forwarded.wrote or after in forwarded.sent_tail + data
            forwarded.sent_tail = data[-len(after) :]
            return False
        if not (forwarded.wrote and COMMIT_REPLY in data):
            return False
        with self._lock:
            if self._lose_after is None:
                return False
            self._lose_after = None
            self.lost_replies += 1
        if self._then_refuse_for:
            self.refuse_for(self._then_refuse_for)
        return True


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


@pytest.fixture
def flaky_database() -> Iterator[FlakyProxy]:
    """Every new connection to the test database (Django's, in any thread, and the turn
    lock's) goes through the proxy while the test runs."""
    database: dict[str, Any] = connections.settings["default"]  # what every thread's wrapper reads
    proxy = FlakyProxy((database.get("HOST") or "127.0.0.1", int(database.get("PORT") or 5432)))
    host, port = database.get("HOST"), database.get("PORT")

    def reconnect() -> None:
        connections.close_all()
        lanes.close_connections()
        SyncToAsync.single_thread_executor.submit(connections.close_all).result(timeout=30)

    database.update(HOST="127.0.0.1", PORT=str(proxy.port))
    reconnect()
    try:
        yield proxy
    finally:
        database.update(HOST=host, PORT=port)
        proxy.close()
        reconnect()


def _saved(key: str) -> list[tuple[str, str | None]]:
    # The proxy may have dropped this thread's connection too: the test reads on a new one.
    connections.close_all()
    return list(
        Message.objects.filter(session__key=key).order_by("id").values_list("role", "content")
    )


def _run(run_id: Any) -> Run:
    connections.close_all()
    return Run.objects.get(pk=run_id)


def _shown(key: str) -> list[str]:
    # What the page shows of the conversation.
    connections.close_all()
    session = Session.objects.get(key=key)
    return [row["role"] for row in selectors.messages_for_display(session=session)]


saved = sync_to_async(_saved)
get_run = sync_to_async(_run)
shown = sync_to_async(_shown)


async def test_a_turn_started_while_postgresql_refuses_connections_waits_for_it(
    flaky_database: FlakyProxy, llm: ScriptedLLM, ada: User
) -> None:
    llm.reply("Here I am.")
    flaky_database.refuse_for(1.0)
    started = time.monotonic()

    result = await run_turn(SessionRef("web:db1", ada), "hello?", channel="web")

    assert flaky_database.refused, "the turn never met the refusing database"
    assert time.monotonic() - started >= 0.9
    assert result.success, result.text
    assert result.text == "Here I am."
    run = await get_run(result.run_id)
    assert run.status == "succeeded"
    assert await saved("web:db1") == [
        ("user", "hello?"),
        ("assistant", "Here I am."),
    ]


async def test_postgresql_refusing_connections_mid_turn_loses_nothing(
    flaky_database: FlakyProxy, llm: ScriptedLLM, ada: User
) -> None:
    llm.tool_call("list_dir", {"path": "."})
    llm.reply("Nothing in there.", delay=0.5)
    turn = run_turn(SessionRef("web:db2", ada), "what is there?", channel="web")
    task = asyncio.ensure_future(turn)

    async def thinking() -> None:
        while len(llm.requests) < 2 or len(await saved("web:db2")) < 3:
            await asyncio.sleep(0.01)

    await asyncio.wait_for(thinking(), 10)
    # The model is thinking and the turn's tool round is saved: every connection the turn
    # holds goes, idle, and for a second the database lets no one back in. (A connection
    # lost while it commits is another matter: whether the commit happened is unknown.)
    flaky_database.refuse_for(1.0)
    result = await asyncio.wait_for(task, 15)

    assert flaky_database.refused, "the turn never met the refusing database"
    assert result.success, result.text
    assert result.text == "Nothing in there."
    run = await get_run(result.run_id)
    assert run.status == "succeeded" and run.tools_used == ["list_dir"]
    messages = await saved("web:db2")
    assert [role for role, _ in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[-1] == ("assistant", "Nothing in there.")

    llm.reply("Still here.")
    again = await run_turn(SessionRef("web:db2", ada), "and now?", channel="web")
    assert again.success and again.text == "Still here."
    assert_valid_history(llm.requests[-1])


@pytest.mark.parametrize("restart", [False, True], ids=["dropped", "restarting"])
@pytest.mark.parametrize(
    "statement",
    [b'INSERT INTO "sessions_app_message"', b'UPDATE "sessions_app_run" SET "status"'],
    ids=["first-messages", "run-ending"],
)
async def test_a_write_whose_commit_went_through_unanswered_saves_each_message_once(
    flaky_database: FlakyProxy, llm: ScriptedLLM, ada: User, statement: bytes, restart: bool
) -> None:
    # The connection dies between the commit and its reply (alone, or with the database
    # restarting): the write is made again on a new connection, not knowing that the first
    # one went through.
    llm.tool_call("list_dir", {"path": "."})
    llm.reply("Nothing in there.")
    flaky_database.lose_commit_reply(after=statement, then_refuse_for=0.5 if restart else 0.0)

    result = await run_turn(SessionRef("web:db3", ada), "what is there?", channel="web")

    assert flaky_database.lost_replies == 1, "no commit's reply was lost"
    assert result.success, result.text
    messages = await saved("web:db3")
    assert [role for role, _ in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[-1] == ("assistant", "Nothing in there.")
    assert await shown("web:db3") == ["user", "assistant", "tool", "assistant"]
    run = await get_run(result.run_id)
    assert run.status == "succeeded"


def _cancelled_query() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = 1")
        try:
            cursor.execute("SELECT pg_sleep(1)")
        finally:
            cursor.execute("SET statement_timeout = 0")


async def test_an_error_of_the_query_itself_is_not_asked_again() -> None:
    calls = 0

    def cancelled() -> None:
        nonlocal calls
        calls += 1
        _cancelled_query()

    started = time.monotonic()
    with pytest.raises(OperationalError, match="statement timeout"):
        await on_db(cancelled)()
    assert calls == 1 and time.monotonic() - started < 0.5
