"""Per-session serialisation and the registry of running turns.

Two turns of one session must never interleave, whichever process runs them. An exclusive
`flock` on a per-session file covers every process on the host (the web server, the
worker, the command line); an asyncio lock in front of it keeps waiters in one process in
order and off the polling path.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import weakref
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

POLL_SECONDS = 0.05

_local_locks: weakref.WeakValueDictionary[int, asyncio.Lock] = weakref.WeakValueDictionary()
_running: dict[int, set[asyncio.Task[object]]] = {}


@contextlib.asynccontextmanager
async def session_lock(session_id: int, *, lock_dir: Path) -> AsyncIterator[None]:
    local = _local_locks.get(session_id)
    if local is None:
        local = _local_locks[session_id] = asyncio.Lock()
    async with local:
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
