"""Per-session serialisation and the registry of running turns.

Two turns of one session must never interleave, whichever process, on whichever host, runs
them. The lock lives where the data lives: on PostgreSQL an advisory lock, held for the
length of the turn by a connection that is not Django's, covers every host of a site; on the
embedded SQLite default, whose processes share one disk, an exclusive `flock` on a
per-session file does. Either way the lock goes with its holder if that process dies (the
database ends its session; the kernel closes its file). An asyncio lock in front keeps
waiters in one process in order and off the polling path.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import weakref
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from django.db import connections

from agent.turn.db import under_sync_caller

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.05
# The first key of every advisory lock a turn takes ("agnt"), so that other users of the
# same database's advisory locks do not collide with sessions.
ADVISORY_LOCK_CLASS = 0x61676E74
CONNECT_ATTEMPTS = 4

_local_locks: weakref.WeakValueDictionary[int, asyncio.Lock] = weakref.WeakValueDictionary()
_running: dict[int, set[asyncio.Task[object]]] = {}


@contextlib.asynccontextmanager
async def session_lock(session_id: int, *, lock_dir: Path) -> AsyncIterator[None]:
    local = _local_locks.get(session_id)
    if local is None:
        local = _local_locks[session_id] = asyncio.Lock()
    async with local:
        held = _advisory_lock if _on_postgresql() else _file_lock
        async with held(session_id, lock_dir):
            yield


@contextlib.asynccontextmanager
async def _file_lock(session_id: int, lock_dir: Path) -> AsyncIterator[None]:
    fd = _open_lock_file(lock_dir, session_id)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                # Another process holds the session; polling keeps the wait cancellable.
                await asyncio.sleep(POLL_SECONDS)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


@contextlib.asynccontextmanager
async def _advisory_lock(session_id: int, lock_dir: Path) -> AsyncIterator[None]:
    key = (ADVISORY_LOCK_CLASS, session_id % 2**31)
    if under_sync_caller():
        # A worker's task or a view: one turn on a loop that ends with it.
        async with _own_connection() as conn:
            await _take(conn, key)
            yield
        return
    # A web process's or the command line's loop, which runs many turns at once and for
    # long: one connection holds all their locks, so that turns do not each take one of
    # the database's connections.
    holder = _holders.get(asyncio.get_running_loop())
    if holder is None:
        holder = _holders[asyncio.get_running_loop()] = _SharedConnection()
    async with holder.used() as conn:
        await _take(conn, key)
        try:
            yield
        finally:
            try:
                await asyncio.shield(conn.execute("SELECT pg_advisory_unlock(%s, %s)", key))
            except Exception:  # a connection that died took its locks with it
                logger.warning("could not release session %s's lock", session_id, exc_info=True)
                holder.drop(conn)


async def _take(conn: Any, key: tuple[int, int]) -> None:
    while True:
        cursor = await conn.execute("SELECT pg_try_advisory_lock(%s, %s)", key)
        row = await cursor.fetchone()
        if row and row[0]:
            return
        await asyncio.sleep(POLL_SECONDS)


@contextlib.asynccontextmanager
async def _own_connection() -> AsyncIterator[Any]:
    conn = await _connect()
    try:
        yield conn
    finally:
        # Closing the connection releases the lock; a cancel arriving meanwhile must not
        # leave the connection, and with it the lock, open.
        await asyncio.shield(conn.close())


class _SharedConnection:
    """The connection that holds every lock of one event loop's turns, open while any of
    them holds or waits for one: an idle process keeps no connection for locks."""

    def __init__(self) -> None:
        self.conn: Any = None
        self.users = 0
        self.opening = asyncio.Lock()

    @contextlib.asynccontextmanager
    async def used(self) -> AsyncIterator[Any]:
        self.users += 1
        try:
            async with self.opening:
                if self.conn is None or self.conn.closed:
                    self.conn = await _connect()
                conn = self.conn
            yield conn
        finally:
            self.users -= 1
            if not self.users and self.conn is not None:
                idle, self.conn = self.conn, None
                await asyncio.shield(idle.close())

    def drop(self, conn: Any) -> None:
        if self.conn is conn:
            self.conn = None


_holders: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _SharedConnection] = (
    weakref.WeakKeyDictionary()
)


async def _connect() -> Any:
    """A connection for locks. Not Django's: Django may close its connections between two
    queries of a turn, and a session-level advisory lock goes with them. A database that
    refuses for a moment (a restart, a full connection table) is asked again a few times
    before the turn gives up."""
    import psycopg

    params = connections["default"].get_connection_params()
    for django_only in ("cursor_factory", "context"):
        params.pop(django_only, None)
    for attempt in range(CONNECT_ATTEMPTS):
        try:
            return await psycopg.AsyncConnection.connect(**params, autocommit=True)
        except psycopg.OperationalError:
            if attempt == CONNECT_ATTEMPTS - 1:
                raise
            await asyncio.sleep(0.25 * 2**attempt)
    raise AssertionError("unreachable")


def _on_postgresql() -> bool:
    return connections["default"].vendor == "postgresql"


def _open_lock_file(lock_dir: Path, session_id: int) -> int:
    lock_dir.mkdir(parents=True, exist_ok=True)
    return os.open(lock_dir / f"session-{session_id}.lock", os.O_RDWR | os.O_CREAT, 0o600)


def is_running(session_id: int) -> bool:
    return any(not task.done() for task in _running.get(session_id, ()))


@contextlib.contextmanager
def tracked(session_id: int) -> Iterator[None]:
    """Register the current task as a turn of the session, so that /stop can find it."""
    task = asyncio.current_task()
    if task is None:
        yield
        return
    _running.setdefault(session_id, set()).add(task)
    try:
        yield
    finally:
        tasks = _running.get(session_id)
        if tasks is not None:
            tasks.discard(task)
            if not tasks:
                _running.pop(session_id, None)


def cancel_running(session_id: int) -> int:
    """Cancel the session's running turns in this process; how many were cancelled."""
    current = asyncio.current_task()
    cancelled = 0
    for task in list(_running.get(session_id, ())):
        if task is not current and not task.done() and task.cancel():
            cancelled += 1
    return cancelled
