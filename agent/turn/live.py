"""The reply a turn is streaming, for the session's other sockets.

Stream chunks never travel the session's group (`fanout` says why). Another socket of the
session, a tab already open that hears the turn start, one that opens meanwhile or the first
one reconnecting, asks the process running the turn to join it (`join_stream`, through the
run's group, which that process's watcher listens on). The turn then sends that socket the
text so far as one `stream_start` and one `stream_chunk`, and from then on the rest of its
stream, straight to the socket's channel. A socket of the turn's own event loop (one
daphne process serves both tabs) joins it at once, with no request through the layer, and is
sent the turn's frames as the socket that asked is: chunks joined on the same rule
(`ChunkCoalescer`), with no layer between (`join_stream_here`).

The text so far and everything after it are taken from one ordered record of the turn's
events, in the turn's own event loop, so the chunks a joined socket sees join to the saved
text: nothing is left out between the snapshot and the rest, and nothing comes twice.
A turn no socket joined costs a list append per chunk.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID

from channels.layers import get_channel_layer

from agent.events import Emit, Event, StreamChunk, StreamEnd, StreamStart
from agent.turn.coalescer import ChunkCoalescer
from agent.turn.fanout import SHARED_TYPES
from agent.turn.groups import run_group

logger = logging.getLogger(__name__)

# A socket's requests to join the stream of a run, and to stop getting it, sent to the
# run's group.
JOIN = "run.join"
LEAVE = "run.leave"
# The turn's answer, to the socket's channel, before any of its frames.
JOINED = "live.joined"
# The handler of the frames a joined socket is sent (`fanout.HANDLER`).
FRAME = "session.event"
# Chunks for a joined socket leave at most this often, joined into one message: the
# channel layer has a capacity per channel, and a fast model sends hundreds a second. A
# chunk after a quiet spell leaves at once, so that a tab that joined sees a model writing at
# a reading pace as soon as the tab that asked does (`ChunkCoalescer`'s rule).
WINDOW = 0.02
LAYER_TIMEOUT = 5.0

Send = Callable[[dict[str, Any]], Awaitable[None]]

# The turns of this process that are streaming, by run.
_turns: dict[UUID, LiveTurn] = {}


class LiveTurn:
    """The turn of one run, as sockets that join it see it: the message it is streaming,
    and the sockets that joined."""

    def __init__(self, run_id: UUID, emit: Emit) -> None:
        self.run_id = run_id
        self.downstream = emit
        self.msg_id = ""
        self.parts: list[str] = []
        # Sockets elsewhere, sent to through the channel layer, and those of this loop.
        self.viewers: dict[str, _Viewer] = {}
        self.here: dict[str, _Here] = {}
        self.loop: asyncio.AbstractEventLoop | None = None

    def emit(self, event: Event) -> Awaitable[None]:
        """The turn's sink: records its stream for sockets that join, then passes every
        event on. Not a coroutine of its own: a chunk costs one more call, not one more
        coroutine."""
        if isinstance(event, StreamChunk):
            self.parts.append(event.content)
        elif isinstance(event, StreamStart):
            self.msg_id, self.parts = event.msg_id, []
        elif isinstance(event, StreamEnd):
            self.msg_id, self.parts = "", []
        elif event.type in SHARED_TYPES:
            if self.viewers or self.here:
                # It goes to the session's group: the joined sockets get the chunks before
                # it first, as the turn said them.
                return self._flush_then(event)
            return self.downstream(event)
        if self.viewers:
            # Stream frames, and the ones only the asking socket gets (thinking notes).
            for viewer in list(self.viewers.values()):
                viewer.push(event)
        if self.here:
            if isinstance(event, StreamChunk):
                waiting = [here for here in self.here.values() if not here.took(event)]
            else:
                waiting = list(self.here.values())
            if waiting:
                return self._with_here(event, waiting)
        return self.downstream(event)

    async def _with_here(self, event: Event, here: list[_Here]) -> None:
        # In the turn's own order: these sockets' sends only buffer, as the asking one's do.
        await self.downstream(event)
        for socket in here:
            await socket.take(event)

    async def _flush_then(self, event: Event) -> None:
        await self._flush()
        await self.downstream(event)

    def open(self) -> None:
        """The turn starts: sockets may join it from now on."""
        self.loop = asyncio.get_running_loop()
        _turns[self.run_id] = self

    def join(self, channel: str, send: Send | None = None) -> None:
        """Send `channel` the message so far, then the rest of the turn's stream: through
        the channel layer, or to `send`, a socket's own, when it is of the turn's loop."""
        if channel in self.viewers or channel in self.here:
            return
        so_far: list[Event] = []
        if self.msg_id:
            so_far.append(StreamStart(msg_id=self.msg_id))
            so_far.append(StreamChunk(msg_id=self.msg_id, content="".join(self.parts)))
        if send is not None:
            self.here[channel] = _Here(send, so_far)
            return
        layer = get_channel_layer()
        if layer is None:
            return
        viewer = self.viewers[channel] = _Viewer(layer, channel, self)
        for event in so_far:
            viewer.push(event)

    def leave(self, channel: str) -> None:
        self.viewers.pop(channel, None)
        here = self.here.pop(channel, None)
        if here is not None:
            here.stop()

    async def _flush(self) -> None:
        for viewer in list(self.viewers.values()):
            await viewer.flush()
        for here in list(self.here.values()):
            await here.flush()

    async def close(self) -> None:
        """The turn is over: what its viewers have not been sent yet leaves now."""
        if _turns.get(self.run_id) is self:
            del _turns[self.run_id]
        await self._flush()
        self.viewers.clear()
        self.here.clear()


class _Viewer:
    """A socket that joined a turn: the messages it has yet to be sent, which leave
    together at most every `WINDOW` seconds, in order."""

    def __init__(self, layer: Any, channel: str, turn: LiveTurn) -> None:
        self.layer = layer
        self.channel = channel
        self.turn = turn
        self.messages: list[dict[str, Any]] = [{"type": JOINED}]
        self.sending = asyncio.Lock()
        self.timer: asyncio.Task[None] | None = None
        self.sent_at = -math.inf
        self._send_soon()

    def push(self, event: Event) -> None:
        frame = event.to_dict()
        last = self.messages[-1].get("frame") if self.messages else None
        if (
            last is not None
            and frame["type"] == last["type"] == StreamChunk.type
            and frame["msg_id"] == last["msg_id"]
        ):
            last["content"] += frame["content"]
        else:
            self.messages.append({"type": FRAME, "frame": frame})
        self._send_soon()

    def _send_soon(self) -> None:
        if self.timer is None:
            wait = self.sent_at + WINDOW - asyncio.get_running_loop().time()
            self.timer = asyncio.create_task(self._flush_soon(wait), name="live-viewer")

    async def _flush_soon(self, wait: float) -> None:
        try:
            if wait > 0:
                await asyncio.sleep(wait)
            await self.flush()
        finally:
            self.timer = None
            if self.messages and self.turn.viewers.get(self.channel) is self:
                self._send_soon()

    async def flush(self) -> None:
        async with self.sending:
            messages, self.messages = self.messages, []
            self.sent_at = asyncio.get_running_loop().time()
            for message in messages:
                try:
                    await asyncio.wait_for(self.layer.send(self.channel, message), LAYER_TIMEOUT)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    # Closed, or too slow to read (its channel is full): it reads the rest
                    # from the saved history when it opens again.
                    logger.info("a socket that joined run %s left", self.turn.run_id, exc_info=True)
                    self.turn.viewers.pop(self.channel, None)
                    return


class _Here:
    """A socket of the turn's own event loop that joined: the turn's frames go to its `send`
    as they go to the socket that asked, in the same call, chunks joined by the same rule.
    The text so far leaves at once, on a task of its own: the turn may be in a long tool
    call, with nothing to send for a while."""

    def __init__(self, send: Send, so_far: list[Event]) -> None:
        self.socket = ChunkCoalescer(send)
        self.opening: asyncio.Task[None] | None = None
        if so_far:
            self.opening = asyncio.create_task(self._send(so_far), name="live-here")

    def took(self, chunk: StreamChunk) -> bool:
        """Take `chunk` without waiting, if it only joins a frame still held back."""
        return self.opening is None and self.socket.took(chunk)

    async def take(self, event: Event) -> None:
        if self.opening is not None:
            await asyncio.wait([self.opening])
            self.opening = None
        await self._send([event])

    async def _send(self, events: list[Event]) -> None:
        for event in events:
            try:
                await self.socket(event)
            except Exception:  # the socket's own send drops what a closed tab cannot take
                logger.debug("a tab that joined could not be sent a frame", exc_info=True)

    async def flush(self) -> None:
        if self.opening is not None:
            await asyncio.wait([self.opening])
        await self.socket.flush()

    def stop(self) -> None:
        if self.opening is not None:
            self.opening.cancel()


def join_stream_here(run_id: UUID, channel: str, send: Send) -> bool:
    """Send a socket of this event loop, `channel`, whose frames go to `send`, the text so
    far of `run_id`'s turn and the rest of its stream, if the turn streams in this loop;
    whether it does (else `join_stream` asks the process that runs it)."""
    turn = _turns.get(run_id)
    try:
        here = turn is not None and turn.loop is asyncio.get_running_loop()
    except RuntimeError:
        here = False
    if turn is not None and here:
        turn.join(channel, send)
    return here


def leave_stream_here(run_id: UUID, channel: str) -> None:
    """A socket that joined `run_id`'s turn with `join_stream_here` closed."""
    remove_viewer(run_id, channel)


def add_viewer(run_id: UUID, channel: str) -> None:
    """A socket's request to join `run_id`'s turn, if it streams in this process."""
    turn = _turns.get(run_id)
    if turn is not None:
        turn.join(channel)


def remove_viewer(run_id: UUID, channel: str) -> None:
    """A socket that joined `run_id`'s turn closed."""
    turn = _turns.get(run_id)
    if turn is not None:
        turn.leave(channel)


async def join_stream(run_id: UUID, channel: str) -> None:
    """Ask the process running `run_id`'s turn, wherever it is, to send `channel` (a
    socket's) the text so far and the rest of its stream. A process with no such turn
    ignores it; with a layer of its own, only this process hears it."""
    await _ask(run_id, channel, kind=JOIN)


async def leave_stream(run_id: UUID, channel: str) -> None:
    """Ask the process running `run_id`'s turn to stop sending `channel` its stream."""
    await _ask(run_id, channel, kind=LEAVE)


async def _ask(run_id: UUID, channel: str, *, kind: str) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    message = {"type": kind, "run": run_id.hex, "reply_to": channel}
    try:
        await asyncio.wait_for(layer.group_send(run_group(run_id), message), LAYER_TIMEOUT)
    except asyncio.CancelledError:
        raise
    except Exception:  # it still gets the reply when the turn ends
        logger.warning("could not ask to join the stream of run %s", run_id, exc_info=True)
