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
import select
import weakref
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from django.db import connections

from agent.turn.db import detached_context

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.05
# The first key of every advisory lock a turn takes ("agnt"), so that other users of the
# same database's advisory locks do not collide with sessions.
ADVISORY_LOCK_CLASS = 0x61676E74
CONNECT_ATTEMPTS = 4
# How often the connection holding the advisory locks is looked at while it holds any.
KEEP_SECONDS = 0.2
# TCP keepalives of the lock connection: a peer gone silent is found in about a minute.
KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
}

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
    # One connection holds the locks of all the turns of an event loop (a web process's or
    # the command line's runs many at once, and for long), so that turns do not each take
    # one of the database's connections. A worker's task runs its turn on a loop of its own
    # that ends with it: that loop's connection and keeper end with its turn.
    loop = asyncio.get_running_loop()
    holder = _holders.get(loop)
    if holder is None:
        holder = _holders[loop] = _LockConnection()
    async with holder.used():
        await holder.take(key)
        try:
            yield
        finally:
            await asyncio.shield(holder.release(key))
            task = asyncio.current_task()
            if task is not None:
                # The loss concerned this turn only: the task may run the session's next.
                _lost.discard(task)


class _LockConnection:
    """The connection that holds the locks of one event loop's turns, open while any of them
    holds or waits for one: an idle process keeps no connection for locks.

    PostgreSQL may drop it (a restart, a terminated backend, a failover), and the locks go
    with it. A keeper task looks at the idle connection every `KEEP_SECONDS`: the server
    writes to it only to say why it closes it (or, rarely, a setting's new value, which one
    query settles). When it is gone, the keeper opens another and takes every lock again. A
    lock another process took meanwhile belongs to a turn of that process now: the turn
    that held it here is cancelled (`lost_lock` tells it why) and saves nothing more.

    Why a keeper rather than a look at the connection before each write: a turn spends most
    of its time waiting for the model, not writing, and a turn that only found out at its
    next write would call the model beside its successor for as long as that call lasts.
    The keeper makes the loss known within `KEEP_SECONDS`, and a turn that takes a lock
    while its session's previous turn is still open gives that turn `TAKEOVER_SECONDS` to
    notice and end first (`agent.turn.service`), so that two turns of a session never run
    at once. A connection cut without a word (a network partition) is found only by TCP's
    own keepalives; the session's fencing token (`Session.turn`) still keeps that turn's
    writes out once another has started. One keeper serves all the turns of the loop, so it
    starts in a context of its own (`detached_context`), not the one of the turn (a view's)
    that happened to start it.
    """

    def __init__(self) -> None:
        self.conn: Any = None
        self.users = 0
        # Held while the connection is opened, or used: the locks held and the connection
        # holding them change together.
        self.opening = asyncio.Lock()
        # The locks held, each with the turn (task) that holds it.
        self.held: dict[tuple[int, int], asyncio.Task[Any]] = {}
        self.keeper: asyncio.Task[None] | None = None

    @contextlib.asynccontextmanager
    async def used(self) -> AsyncIterator[None]:
        self.users += 1
        try:
            yield
        finally:
            self.users -= 1
            if not self.users:
                keeper = self._close()
                if keeper is not None:
                    await asyncio.shield(asyncio.wait([keeper]))

    def _close(self) -> asyncio.Task[None] | None:
        """Close the connection and cancel the keeper, at once: nothing here waits, so that
        neither a second cancel nor the end of the event loop (a worker's task, a test) can
        leave the connection open, holding a backend of the database, until the garbage
        collector finds it. The keeper, to be waited for, is returned."""
        idle, self.conn = self.conn, None
        keeper, self.keeper = self.keeper, None
        if keeper is not None:
            # First: it would take a connection it finds closed for lost, and open another.
            keeper.cancel()
        if idle is not None and not idle.closed:
            with contextlib.suppress(Exception):
                idle.pgconn.finish()  # all AsyncConnection.close does, without its await
        return keeper

    async def take(self, key: tuple[int, int]) -> None:
        """Wait until this loop holds `key`, for the current task."""
        import psycopg  # here, not at the top: on SQLite it would cost a fifth of a second

        task = asyncio.current_task()
        assert task is not None  # a lock is taken inside a task
        while True:
            async with self.opening:
                conn = await self._connection(attempts=CONNECT_ATTEMPTS)
                try:
                    taken = await _try_lock(conn, key)
                except psycopg.OperationalError:
                    # Gone, with whatever it held: the next round opens another and takes
                    # the other turns' locks again.
                    await _close_quietly(conn)
                    continue
                if taken:
                    self.held[key] = task
                    if self.keeper is None or self.keeper.done():
                        self.keeper = asyncio.create_task(
                            self._keep(), name="session-lock-keeper", context=detached_context()
                        )
                    return
            await asyncio.sleep(POLL_SECONDS)

    async def release(self, key: tuple[int, int]) -> None:
        import psycopg

        # At once: the keeper must not take the lock again, nor cancel the turn that is
        # letting go of it.
        if self.held.pop(key, None) is None:
            return  # lost to another process's turn
        async with self.opening:
            conn = self.conn
            if conn is None or conn.closed:
                return  # a connection that died took its locks with it
            try:
                await conn.execute("SELECT pg_advisory_unlock(%s, %s)", key)
            except psycopg.OperationalError:
                logger.warning("could not release the session lock %s", key, exc_info=True)
                await _close_quietly(conn)

    async def _keep(self) -> None:
        import psycopg

        while self.held:
            await asyncio.sleep(KEEP_SECONDS)
            if self.opening.locked() or not _has_news(self.conn):
                continue  # in use (whoever uses it finds out), or quiet
            async with self.opening:
                conn = self.conn
                if conn is not None and not conn.closed:
                    try:
                        await conn.execute("SELECT 1")
                        continue
                    except psycopg.OperationalError:
                        await _close_quietly(conn)
                logger.warning("the connection holding the session locks was lost")
                try:
                    await self._connection(attempts=1)
                except psycopg.OperationalError:
                    # The database is away: no one else gets the locks meanwhile either.
                    logger.warning("could not take the session locks again yet", exc_info=True)

    async def _connection(self, *, attempts: int) -> Any:
        """The open connection; a new one if it was lost, holding again every lock the lost
        one held that no one else has taken meanwhile. Called under `opening`."""
        if self.conn is not None and not self.conn.closed:
            return self.conn
        self.conn = None
        conn = await _connect(attempts=attempts)
        try:
            for key, task in list(self.held.items()):
                if await _try_lock(conn, key):
                    logger.info("took the session lock %s again", key)
                    continue
                logger.warning("the session lock %s went to another turn; its turn here stops", key)
                del self.held[key]
                _lost.add(task)
                task.cancel()
        except BaseException:
            await _close_quietly(conn)
            raise
        self.conn = conn
        return conn


_holders: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LockConnection] = (
    weakref.WeakKeyDictionary()
)
_lost: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()


def lost_lock() -> bool:
    """Whether the current task was cancelled because its session's lock went to another
    turn (its database connection was dropped, and someone else took the lock meanwhile)."""
    task = asyncio.current_task()
    return task is not None and task in _lost


async def _try_lock(conn: Any, key: tuple[int, int]) -> bool:
    cursor = await conn.execute("SELECT pg_try_advisory_lock(%s, %s)", key)
    row = await cursor.fetchone()
    return bool(row and row[0])


def _has_news(conn: Any) -> bool:
    """Whether the server wrote to the idle connection (or it is gone): at once, without
    asking it anything."""
    import psycopg

    if conn is None or conn.closed:
        return True
    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError, psycopg.Error):
        return True
    return bool(readable)


async def _close_quietly(conn: Any) -> None:
    with contextlib.suppress(Exception):
        await conn.close()


async def _connect(*, attempts: int) -> Any:
    """A connection for locks. Not Django's: Django may close its connections between two
    queries of a turn, and a session-level advisory lock goes with them. A database that
    refuses for a moment (a restart, a full connection table) is asked again, up to
    `attempts` times in all."""
    import psycopg

    params = connections["default"].get_connection_params()
    for django_only in ("cursor_factory", "context"):
        params.pop(django_only, None)
    # A connection cut without a word (a network partition) would otherwise go unnoticed
    # for the system's two hours, and its turn with it: TCP keepalives find it in a minute.
    for name, value in KEEPALIVES.items():
        params.setdefault(name, value)
    # Named in pg_stat_activity, by process: an operator tells the lock connections apart.
    params["application_name"] = lock_connection_name()
    import tenacity  # with psycopg: only a site on PostgreSQL takes these locks

    retrying = tenacity.AsyncRetrying(
        retry=tenacity.retry_if_exception_type(psycopg.OperationalError),
        stop=tenacity.stop_after_attempt(attempts),
        wait=tenacity.wait_exponential(multiplier=0.25),
        reraise=True,
    )
    async for attempt in retrying:
        with attempt:
            return await psycopg.AsyncConnection.connect(**params, autocommit=True)
    raise AssertionError("unreachable: the last failure is raised")


def lock_connection_name(pid: int | None = None) -> str:
    """The `application_name` of the lock connections of process `pid` (this one's)."""
    return f"agentsite session locks {os.getpid() if pid is None else pid}"


def _on_postgresql() -> bool:
    return connections["default"].vendor == "postgresql"


def can_be_lost() -> bool:
    """Whether a session lock can be lost while held: the database's advisory lock goes with
    a dropped connection; the embedded default's file lock lasts as long as its process."""
    return _on_postgresql()


def _open_lock_file(lock_dir: Path, session_id: int) -> int:
    lock_dir.mkdir(parents=True, exist_ok=True)
    return os.open(lock_dir / f"session-{session_id}.lock", os.O_RDWR | os.O_CREAT, 0o600)


def is_running_here(session_id: int) -> bool:
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
