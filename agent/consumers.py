"""The web chat door: one WebSocket per open chat, `/ws/chat/<chat_id>/`.

The socket translates frames into `run_turn` calls and events back into frames. Each turn
runs as its own task, so `stop`, new messages, group events and a disconnect are handled
while it streams; a turn outlives a closed tab and is saved all the same.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import Any

from channels.generic.websocket import AsyncJsonWebsocketConsumer

from agent import store
from agent.concurrency import is_running
from agent.conf import agent_settings
from agent.errors import MAX_MESSAGE_CHARS, TurnError
from agent.events import ErrorEvent, Event, History, StreamChunk
from agent.fanout import GroupSink, group_name
from agent.service import run_turn

logger = logging.getLogger(__name__)

CHAT_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
CHANNEL = "web"
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
# A frame larger than any message the contract allows is refused before it is parsed.
MAX_FRAME_CHARS = MAX_MESSAGE_CHARS + 1_000

# Turns keep running after their socket closes; this keeps them referenced until done.
_turns: set[asyncio.Task[None]] = set()


class ChatConsumer(AsyncJsonWebsocketConsumer):
    session_key = ""
    group = ""

    async def connect(self) -> None:
        await self.accept()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        chat_id = self.scope["url_route"]["kwargs"]["chat_id"]
        if not CHAT_ID.match(chat_id):
            await self.close(code=CLOSE_NOT_FOUND)
            return
        session = await store.claim_session(key=f"{CHANNEL}:{chat_id}", owner=user)
        if session is None:
            # Another user's chat: say nothing about it, not even that it exists.
            await self.close(code=CLOSE_FORBIDDEN)
            return
        self.user = user
        self.session_key = session.key
        self.group = group_name(session.key)
        await self.channel_layer.group_add(self.group, self.channel_name)
        messages = await store.messages_for_display(session=session)
        running = is_running(session.key) or await store.has_running_turn(session=session)
        frame = History(messages=messages, running=running).to_dict()
        frame["model"] = session.model or agent_settings().model
        await self.send_json(frame)

    async def disconnect(self, code: int) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)
        self.session_key = ""

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if not self.session_key:
            return
        if text_data is None or len(text_data) > MAX_FRAME_CHARS:
            await self._error(f"send a JSON text frame of at most {MAX_MESSAGE_CHARS} characters")
            return
        try:
            frame = json.loads(text_data)
        except json.JSONDecodeError:
            await self._error("the frame is not valid JSON")
            return
        await self.receive_json(frame)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        kind = content.get("type") if isinstance(content, dict) else None
        if kind == "stop":
            self._start("/stop")
        elif kind == "message":
            text = content.get("content")
            if not isinstance(text, str) or not text.strip():
                await self._error("the message is empty")
            elif len(text) > MAX_MESSAGE_CHARS:
                await self._error(f"the message is longer than {MAX_MESSAGE_CHARS} characters")
            else:
                self._start(text)
        else:
            await self._error(
                'unknown frame: send {"type": "message", "content": "…"} or {"type": "stop"}'
            )

    def _start(self, content: str) -> None:
        # A second message while a turn runs is accepted and waits for that turn to end:
        # the turn service serialises turns per session.
        task = asyncio.create_task(self._turn(content))
        _turns.add(task)
        task.add_done_callback(_turns.discard)

    async def _turn(self, content: str) -> None:
        group = GroupSink(self.session_key, origin=self.channel_name)
        socket = ChunkCoalescer(self._send_frame)
        key = self.session_key

        async def emit(event: Event) -> None:
            await socket(event)
            await group(event)

        try:
            await run_turn(key, content, channel=CHANNEL, emit=emit, owner=self.user)
        except TurnError as exc:
            await self._error(str(exc))
        except asyncio.CancelledError:
            pass  # stopped: the service recorded it and told the socket
        except Exception:
            logger.exception("turn of %s failed", key)
            await self._error("the turn failed unexpectedly; see the server log")

    async def session_event(self, message: dict[str, Any]) -> None:
        """An event of this session from another socket, process, job or sub-agent.

        Channels routes group messages of type `session.event` (`fanout.HANDLER`) here.
        """
        if message.get("origin") != self.channel_name:
            await self._send_frame(message["frame"])

    async def _send_frame(self, frame: dict[str, Any]) -> None:
        if not self.session_key:
            return  # the tab closed; the turn goes on without it
        try:
            await self.send_json(frame)
        except Exception:  # the socket went away between the check and the send
            logger.debug("dropped a frame for a closed socket", exc_info=True)

    async def _error(self, message: str) -> None:
        await self._send_frame(ErrorEvent(message=message).to_dict())


class ChunkCoalescer:
    """Joins stream chunks that arrive within `window` seconds into one frame.

    A fast model sends hundreds of tiny chunks a second; one frame each costs the server
    more than the model's parsing does. Chunks of one message are joined in order and
    flushed before any other event, so the frames still concatenate to the saved text.
    """

    def __init__(self, send: Any, *, window: float = 0.02) -> None:
        self.send = send
        self.window = window
        self.msg_id = ""
        self.parts: list[str] = []
        self.flusher: asyncio.Task[None] | None = None

    async def __call__(self, event: Event) -> None:
        if isinstance(event, StreamChunk):
            if self.parts and event.msg_id != self.msg_id:
                await self.flush()
            self.msg_id = event.msg_id
            self.parts.append(event.content)
            if self.flusher is None:
                self.flusher = asyncio.create_task(self._flush_later())
            return
        await self.flush()
        await self.send(event.to_dict())

    async def _flush_later(self) -> None:
        await asyncio.sleep(self.window)
        self.flusher = None
        await self.flush()

    async def flush(self) -> None:
        if self.flusher is not None:
            self.flusher.cancel()
            self.flusher = None
        if self.parts:
            content, self.parts = "".join(self.parts), []
            await self.send(StreamChunk(msg_id=self.msg_id, content=content).to_dict())
