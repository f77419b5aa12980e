"""The turns a chat socket started, each running as a task of its own.

A turn runs as its own task so that the socket goes on reading frames while it streams (a
`stop`, another message, a group's event, a disconnect). Its events go to the socket, a
chunk of text coalesced with the next, and to the session's other sockets; a turn that
cannot go on says why in an error frame. A turn outlives its socket's close and is saved all
the same; only a socket whose access ended stops the turns it started (`cancel`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from agent import failures
from agent.events import Emit, Event, MessageEvent
from agent.turn import ChunkCoalescer, GroupSink, SessionGone, TurnError

logger = logging.getLogger(__name__)

Turn = Callable[[Emit], Awaitable[object]]

# Turns keep running after their socket closes; this keeps them referenced until done.
RUNNING: set[asyncio.Task[None]] = set()


class SocketTurns:
    """The turns one socket started and that have not finished: one running, the rest
    waiting their turn (the turn service serialises a session's turns)."""

    def __init__(
        self,
        *,
        channel: str,
        session_id: Callable[[], int | None],
        label: str,
        send: Callable[[dict[str, Any]], Awaitable[None]],
        error: Callable[[str], Awaitable[None]],
        gone: Callable[[], Awaitable[None]],
    ) -> None:
        # `session_id` is asked at each turn's start: None once the socket closed.
        self.channel = channel
        self.session_id = session_id
        self.label = label
        self.send = send
        self.error = error
        self.gone = gone
        self.pending: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self.pending)

    def launch(self, turn: Turn) -> None:
        """Run `turn` with an emit that reaches this socket and the session's others."""
        task = asyncio.create_task(self._run(turn))
        RUNNING.add(task)
        task.add_done_callback(RUNNING.discard)
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)

    def cancel(self) -> None:
        """Stop every turn of the socket's, but the one this is called from: it is ending
        on its own, and cancelling it would cut short the socket's close it is making."""
        current = asyncio.current_task()
        for task in list(self.pending):
            if task is not current:
                task.cancel()

    async def _run(self, turn: Turn) -> None:
        session_id = self.session_id()
        if session_id is None:
            return
        group = GroupSink(session_id, origin=self.channel)
        socket = ChunkCoalescer(self.send)

        async def emit(event: Event) -> None:
            await socket(event)
            await group(event)

        try:
            await turn(emit)
        except SessionGone as exc:
            await self.error(str(exc))
            await self.gone()
        except TurnError as exc:
            await self.error(str(exc))
        except asyncio.CancelledError:
            pass  # stopped: the service recorded it and told the socket
        except Exception:
            ref = failures.log_failure(logger, "turn of %s failed", self.label)
            await self.error(failures.internal_error(ref))


def without_replies(emit: Emit) -> Emit:
    """`emit` without the `message` events: a turn whose answer the socket gives otherwise."""

    async def passed(event: Event) -> None:
        if not isinstance(event, MessageEvent):
            await emit(event)

    return passed
