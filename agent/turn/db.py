"""Where the async side's database calls run.

Django's ORM is synchronous, so each call goes to a thread. asgiref's default sends every
call of a process to one thread, so every socket's queries wait behind each other's. On
the embedded SQLite, whose single writer serialises them anyway, that is what it wants; on
PostgreSQL a slow query of one conversation would hold up all the others. There, calls
made from async code go to a few lanes, each a thread with a connection of its own, the
least busy lane first.

A call made under `async_to_sync` from a sync thread (a view, a worker's task) stays in
that thread, as asgiref would keep it: it must see what that thread's open transaction
has written. A task that outlives such a call (the process's run watcher, say, which a
task run from an API request may be the first to need) must not carry that thread along:
it starts in `detached_context()`.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from asgiref.sync import AsyncToSync, SyncToAsync, sync_to_async
from django.db import InterfaceError, OperationalError, connections

logger = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

LANES = 4
# How often a call asks again while the database refuses to connect, waiting CONNECT_BACKOFF
# the first time and twice as long each time after: about four seconds in all.
CONNECT_RETRIES = 4
CONNECT_BACKOFF = 0.25


class Lanes:
    """Single-thread executors, each keeping its own database connection."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._executors: list[ThreadPoolExecutor] = []
        self._busy: list[int] = []

    async def run(self, fn: Callable[..., R], *args: Any, **kwargs: Any) -> R:
        lane = self._take()
        try:
            call = functools.partial(_call, fn, args, kwargs)
            return await asyncio.get_running_loop().run_in_executor(self._executors[lane], call)
        finally:
            with self._lock:
                self._busy[lane] -= 1

    def _take(self) -> int:
        with self._lock:
            if not self._executors:
                for number in range(self.size):
                    self._executors.append(
                        ThreadPoolExecutor(1, thread_name_prefix=f"db-lane-{number}")
                    )
                    self._busy.append(0)
            lane = min(range(self.size), key=self._busy.__getitem__)
            self._busy[lane] += 1
            return lane

    def close_connections(self) -> None:
        """Close every lane's connections (tests, before their database is dropped)."""
        with self._lock:
            executors = list(self._executors)
        for executor in executors:
            executor.submit(connections.close_all).result(timeout=30)


lanes = Lanes(LANES)


def _call(fn: Callable[..., R], args: tuple[Any, ...], kwargs: dict[str, Any]) -> R:
    _drop_broken_connections()
    refusals = 0
    replaced = False
    while True:
        try:
            return fn(*args, **kwargs)
        except (OperationalError, InterfaceError):
            if _refused() and refusals < CONNECT_RETRIES:
                # The database would not let us in (a restart, a failover, a full connection
                # table): nothing ran, so ask again a little later, for a few seconds in all.
                delay = CONNECT_BACKOFF * 2**refusals
                refusals += 1
                logger.warning(
                    "the database refused a connection; %s tries again in %.2f s",
                    fn.__qualname__,
                    delay,
                )
                time.sleep(delay)
            elif not replaced and _drop_broken_connections():
                # A connection that died while idle (the database restarted) fails the first
                # call that uses it. Once more on a new connection: a call's writes are one
                # statement or one transaction, which the dead connection took back. (Unless
                # it died between the commit and its reply: a run's messages are numbered,
                # `Message.seq`, so that a write made again saves none of them twice.)
                replaced = True
                logger.info("the database connection had gone; %s runs again", fn.__qualname__)
            else:
                raise


def _refused() -> bool:
    """Whether the call that just failed could not connect at all, so that none of it ran."""
    conn = connections["default"]
    return conn.connection is None and conn.errors_occurred


def _drop_broken_connections() -> bool:
    """Close the connections that failed (the database restarted, or refused us for a
    moment), so that the next query opens a new one instead of failing the same way; True
    if there was one."""
    dropped = False
    for conn in connections.all(initialized_only=True):
        if conn.connection is not None and conn.errors_occurred:
            if conn.is_usable():
                conn.errors_occurred = False
            else:
                logger.info("dropping a broken %s connection", conn.vendor)
                conn.close()
                dropped = True
    return dropped


def on_db(fn: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """`fn` (a selector or service) made awaitable, run where the database wants it."""
    serial = sync_to_async(fn)

    @functools.wraps(fn)
    async def call(*args: P.args, **kwargs: P.kwargs) -> R:
        if under_sync_caller() or connections["default"].vendor != "postgresql":
            return await serial(*args, **kwargs)
        return await lanes.run(fn, *args, **kwargs)

    return call


def under_sync_caller() -> bool:
    """Whether this async code runs under `async_to_sync` from a sync thread (a view, a
    worker's task), whose connections end with the call, or on a loop that `async_to_sync`
    made for such a call (a worker's), which ends with it."""
    return bool(
        getattr(AsyncToSync.executors, "current", None)
        or SyncToAsync.thread_sensitive_context.get(None)
        or asyncio.get_running_loop() in AsyncToSync.loop_thread_executors
    )


def detached_context() -> contextvars.Context:
    """The context for a task that outlives the code starting it and serves others: the
    process's watcher, relay reader. A task copies its starter's context, and with it the
    thread of a sync caller (a view's `async_to_sync` on the server's loop), where asgiref
    sends every database call of that context; that thread stops waiting for work when
    the view returns, and each call after that fails ("CurrentThreadExecutor already quit
    or is broken"). Started empty, such a task's calls go where any socket's go."""
    return contextvars.Context()
