"""A socket joining its session's group, and the frames published before it joined.

channels-redis's publish/subscribe layer hands a group's message to the sockets of the
process that are in the group when its reader gets to the message, not when the message was
published. A reader that lags behind (a busy process) can so hand a socket that has just
opened the end of a turn that its history already shows: the reply a second time, or the
notice of a `/new` that empties the tab.

So a socket that joins sends its group a mark of its own, before it reads the history, and
holds the group's frames until a mark comes back: what came before the first mark was
published before the socket joined, and is dropped. A mark sent before the layer's new
subscription to the group takes effect is lost; nothing can be stale then (the process heard
nothing of the group before), so a later mark that comes back first lets what was held
through. After `MARKS` marks with none back, what was held goes through as it is.

A socket that opens while a turn streams in another socket's process joins that stream too
(`StreamJoin`): it asks the turn for the text so far and the rest of it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID

from agent.turn import join_stream, leave_stream

logger = logging.getLogger(__name__)

# The group message type of a mark; channels calls the consumer's `session_joined`.
JOINED = "session.joined"
MARK_EVERY = 0.25
MARKS = 8
# How long a socket that joins a turn's stream waits for the turn to answer each of its
# requests before it asks again. A turn that has only just started may not listen yet, and
# a tab already open asks as soon as it hears the turn start: the first waits are short, so
# that it misses no more than a few chunks' time. Asking again costs nothing: a turn sends
# a socket that joined twice its stream once. A busy process (a turn on another, behind
# Redis) may take seconds to answer: the later waits are long, so that a tab joins a turn
# late rather than see only its end; the request is dropped as soon as the turn ends.
JOIN_WAITS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0)


class JoinMark:
    """The group frames of one socket, held from its joining until its mark comes back."""

    def __init__(
        self,
        layer: Any,
        group: str,
        channel: str,
        deliver: Callable[[dict[str, Any]], Awaitable[None]],
    ) -> None:
        self.layer = layer
        self.group = group
        self.channel = channel
        self.deliver = deliver
        self.held: list[dict[str, Any]] | None = []
        self.sent = 0
        self.resender: asyncio.Task[None] | None = None
        self.giving_up = False

    async def send(self) -> None:
        """The first mark, at once: called right after `group_add`, before the history is
        read, so that nothing published between the two goes missing."""
        if not await self._mark():
            await self._let_through()
            return
        self.resender = asyncio.create_task(self._resend())

    def hold(self, message: dict[str, Any]) -> bool:
        """Keep `message` until a mark comes back; False once one has, and the caller
        delivers it."""
        if self.held is None:
            return False
        self.held.append(message)
        return True

    async def came_back(self, message: dict[str, Any]) -> None:
        """A mark reached this socket: its own, or another socket's, which it ignores."""
        if message.get("channel") != self.channel or self.held is None or self.giving_up:
            return
        self.stop()
        if message.get("mark") == 1:
            if self.held:
                logger.debug("dropped %d frame(s) published before a socket joined", len(self.held))
            self.held = None
        else:
            await self._let_through()

    def stop(self) -> None:
        if self.resender is not None:
            self.resender.cancel()

    async def _resend(self) -> None:
        # Until a mark comes back (`came_back` cancels it) or the last one had its time to.
        while self.sent < MARKS:
            await asyncio.sleep(MARK_EVERY)
            if not await self._mark():
                break
        await asyncio.sleep(MARK_EVERY)
        logger.warning("no mark came back to socket %s: its held frames go through", self.channel)
        self.giving_up = True
        await self._let_through()

    async def _mark(self) -> bool:
        self.sent += 1
        try:
            await self.layer.group_send(
                self.group, {"type": JOINED, "channel": self.channel, "mark": self.sent}
            )
        except Exception:  # a layer away for a moment: better a stale frame than none
            logger.warning(
                "could not mark socket %s in %s", self.channel, self.group, exc_info=True
            )
            return False
        return True

    async def _let_through(self) -> None:
        # Frames that arrive meanwhile join the end of the list, so the order holds.
        while self.held:
            await self.deliver(self.held.pop(0))
        self.held = None


class StreamJoin:
    """One socket's request for the text that run `run_id`'s turn has streamed so far, and
    the rest of it (`agent.turn.join_stream`), made at once."""

    def __init__(self, run_id: UUID, channel: str) -> None:
        self.run_id = run_id
        self.channel = channel
        self.joined = asyncio.Event()
        self.task = asyncio.create_task(self._ask())

    def took(self) -> None:
        """The turn took the request: its frames follow."""
        self.joined.set()

    def drop(self) -> None:
        """The turn ended: it sends nothing more, and there is nothing to tell it."""
        self.task.cancel()

    async def leave(self) -> None:
        """The socket closed."""
        self.task.cancel()
        if self.joined.is_set():
            # The turn would go on sending this socket its stream until the layer refused it.
            await leave_stream(self.run_id, self.channel)

    async def _ask(self) -> None:
        # A turn that has only just started may not listen on its run's group yet.
        for wait in JOIN_WAITS:
            await join_stream(self.run_id, self.channel)
            try:
                await asyncio.wait_for(self.joined.wait(), wait)
                return
            except TimeoutError:
                continue
