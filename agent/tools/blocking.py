"""Tools' blocking calls, each in a thread counted against the turn's owner.

Why not `asyncio.to_thread`: it runs a call in the event loop's default executor, a pool of
a few threads (cores + 4) that the whole process shares, and that more than tools need: the
name lookups of every HTTP client (the model's included) and what the turn package hands
to a thread run there too. A call that never returns (an open of a named pipe, a read of a
hung network share) keeps its thread for good; a handful of them, from one user, held every
thread of the pool, and every user's turns stopped.

Here an owner has at most `per_owner` calls running at once. A call past that waits up to
`wait` seconds for one of them to end, and is refused plainly after. Threads are not a
fixed pool either: a call takes an idle thread, or starts one when none is idle, so a
thread that never returns holds one of its owner's places and nobody else's. A call that
the registry's time limit (or a stop) cancels returns at once; its thread lives on until
the call ends, and keeps its owner's place till then. Threads are daemons: a stuck one does
not hold up the process's exit. A thread idle for IDLE_SECONDS ends, and at most MAX_IDLE
wait for work, so that a burst leaves no crowd behind.

A waiting call looks for a free place every POLL seconds rather than being handed one: calls
end in threads of their own, and the owner's waiting calls may be on any event loop of the
process (a worker runs each task in a loop of its own). Only calls past an owner's few wait
at all, and file tools' calls take milliseconds.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ParamSpec, Protocol, TypeVar

from agent.tools.tool_errors import ToolError

logger = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

PER_OWNER = 4
WAIT = 30.0
POLL = 0.02
MAX_IDLE = 8
IDLE_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class _Job:
    owner: object
    context: contextvars.Context
    call: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    loop: asyncio.AbstractEventLoop
    done: asyncio.Future[Any]


class OwnerThreads:
    """Threads for blocking calls, at most `per_owner` calls running per owner."""

    def __init__(self, *, per_owner: int = PER_OWNER, wait: float = WAIT) -> None:
        self.per_owner = per_owner
        self.wait = wait
        self._lock = threading.Lock()
        self._running: dict[object, int] = {}
        self._idle: list[_Worker] = []

    def running(self, owner: object) -> int:
        """How many calls of `owner` are still running (some maybe long cancelled)."""
        with self._lock:
            return self._running.get(owner, 0)

    async def run(
        self, owner: object, call: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs
    ) -> R:
        """`call(*args, **kwargs)` in a thread, counted against `owner`; its result.
        Raises ToolError when the owner's places stay taken for `wait` seconds."""
        await self._take(owner)
        loop = asyncio.get_running_loop()
        done: asyncio.Future[R] = loop.create_future()
        job = _Job(owner, contextvars.copy_context(), call, args, kwargs, loop, done)
        try:
            self._worker().jobs.put(job)
        except BaseException:
            self._give(owner)
            raise
        return await done

    async def _take(self, owner: object) -> None:
        deadline = time.monotonic() + self.wait
        while not self._try_take(owner):
            if time.monotonic() >= deadline:
                logger.warning("owner %s has %d tool calls still running", owner, self.per_owner)
                raise ToolError(
                    f"{self.per_owner} earlier tool calls of yours are still running (one "
                    "may be waiting for something that never answers), and this one waited "
                    f"{self.wait:g} seconds for one of them to end. Try again later, or "
                    "another way."
                )
            await asyncio.sleep(POLL)

    def _try_take(self, owner: object) -> bool:
        with self._lock:
            running = self._running.get(owner, 0)
            if running >= self.per_owner:
                return False
            self._running[owner] = running + 1
            return True

    def _give(self, owner: object) -> None:
        with self._lock:
            left = self._running[owner] - 1
            if left:
                self._running[owner] = left
            else:
                del self._running[owner]

    def _worker(self) -> _Worker:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return _Worker(self)

    def _rest(self, worker: _Worker) -> bool:
        """Whether `worker`, done with its call, waits for another (else it ends)."""
        with self._lock:
            if len(self._idle) >= MAX_IDLE:
                return False
            self._idle.append(worker)
            return True

    def _retire(self, worker: _Worker) -> bool:
        """Whether `worker`, idle for long, may end: not when a call took it meanwhile."""
        with self._lock:
            if worker not in self._idle:
                return False
            self._idle.remove(worker)
            return True


class _Worker:
    def __init__(self, threads: OwnerThreads) -> None:
        self.threads = threads
        self.jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        threading.Thread(target=self._serve, name="tool-call", daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                job = self.jobs.get(timeout=IDLE_SECONDS)
            except queue.Empty:
                if self.threads._retire(self):
                    return
                continue
            result, error = self._call(job)
            # Idle again before the answer goes: the caller's next call finds this thread.
            resting = self.threads._rest(self)
            _settle(job, result, error)
            if not resting:
                return

    def _call(self, job: _Job) -> tuple[Any, BaseException | None]:
        try:
            return job.context.run(job.call, *job.args, **job.kwargs), None
        except BaseException as exc:  # handed to the awaiting call, which raises it
            return None, exc
        finally:
            # Before the answer too: whoever gets it finds the owner's place free again.
            self.threads._give(job.owner)


def _settle(job: _Job, result: Any, error: BaseException | None) -> None:
    def settle() -> None:
        if job.done.cancelled():  # the call was stopped meanwhile; nobody waits for this
            return
        if error is not None:
            job.done.set_exception(error)
        else:
            job.done.set_result(result)

    try:
        job.loop.call_soon_threadsafe(settle)
    except RuntimeError:  # the loop is closed: its turn ended while the call ran on
        logger.info("a tool call ended after its event loop was closed")


threads = OwnerThreads()


class _Turn(Protocol):
    """What is needed of a turn's context (`ToolContext`): whose calls these are. Named so,
    rather than imported, since the hooks that tools' contexts hold use these threads too."""

    @property
    def owner_id(self) -> int | None: ...


async def run_blocking(ctx: _Turn, call: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """`call(*args, **kwargs)` off the event loop, in a thread counted against the owner of
    the turn of `ctx` (see the module's docstring); its result."""
    return await threads.run(ctx.owner_id, call, *args, **kwargs)
