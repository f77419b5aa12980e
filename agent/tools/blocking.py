"""Tools' blocking calls, each in a thread of its own, counted against the turn's owner.

Why not `asyncio.to_thread`: it runs a call in the event loop's default executor, a pool of
a few threads (cores + 4) that the whole process shares, and that more than tools need: the
name lookups of every HTTP client (the model's included) and what the turn package hands
to a thread run there too. A call that never returns (an open of a named pipe, a read of a
hung network share) keeps its thread for good; a handful of them, from one user, held every
thread of the pool, and every user's turns stopped.

Here each call gets a new daemon thread, and an owner has at most `per_owner` of them alive
at once. A call past that waits up to `wait` seconds for one of them to end, and is refused
plainly after. So a thread that never returns holds one of its owner's places, never one of
anybody else's, nor the shared pool. A call that the registry's time limit (or a stop)
cancels returns at once; its thread lives on until the call ends, and keeps its owner's
place till then. Being a daemon, a stuck thread does not hold up the process's exit either.

A waiting call looks for a free place every POLL seconds rather than being handed one: the
threads end in threads of their own, and the owner's waiting calls may be on any event loop
of the process (a worker runs each task in a loop of its own). Only calls past an owner's
few wait at all, and file tools' calls take milliseconds.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from agent.tools.base import ToolContext, ToolError

logger = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

PER_OWNER = 4
WAIT = 30.0
POLL = 0.02


class OwnerThreads:
    """Threads for blocking calls, at most `per_owner` alive per owner."""

    def __init__(self, *, per_owner: int = PER_OWNER, wait: float = WAIT) -> None:
        self.per_owner = per_owner
        self.wait = wait
        self._lock = threading.Lock()
        self._alive: dict[object, int] = {}

    def alive(self, owner: object) -> int:
        """How many threads of `owner` are still running (some maybe long cancelled)."""
        with self._lock:
            return self._alive.get(owner, 0)

    async def run(
        self, owner: object, call: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs
    ) -> R:
        """`call(*args, **kwargs)` in a new thread counted against `owner`; its result.
        Raises ToolError when the owner's places stay taken for `wait` seconds."""
        await self._take(owner)
        loop = asyncio.get_running_loop()
        done: asyncio.Future[R] = loop.create_future()
        context = contextvars.copy_context()

        def work() -> None:
            result: Any = None
            error: BaseException | None = None
            try:
                result = context.run(call, *args, **kwargs)
            except BaseException as exc:  # handed to the awaiting call, which raises it
                error = exc
            finally:
                # Before the answer: whoever gets it finds the place free again.
                self._give(owner)
            _settle(loop, done, result, error)

        name = f"tool-call-{owner}"
        try:
            threading.Thread(target=work, name=name, daemon=True).start()
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
            alive = self._alive.get(owner, 0)
            if alive >= self.per_owner:
                return False
            self._alive[owner] = alive + 1
            return True

    def _give(self, owner: object) -> None:
        with self._lock:
            left = self._alive[owner] - 1
            if left:
                self._alive[owner] = left
            else:
                del self._alive[owner]


def _settle(
    loop: asyncio.AbstractEventLoop,
    done: asyncio.Future[Any],
    result: Any,
    error: BaseException | None,
) -> None:
    def settle() -> None:
        if done.cancelled():  # the call was stopped meanwhile; nobody waits for this
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)

    try:
        loop.call_soon_threadsafe(settle)
    except RuntimeError:  # the loop is closed: its turn ended while the call ran on
        logger.info("a tool call ended after its event loop was closed")


threads = OwnerThreads()


async def run_blocking(
    ctx: ToolContext, call: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs
) -> R:
    """`call(*args, **kwargs)` off the event loop, in a thread counted against the owner of
    the turn of `ctx` (see the module's docstring); its result."""
    return await threads.run(ctx.owner_id, call, *args, **kwargs)
