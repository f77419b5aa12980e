"""One request's turn: run as a task of its own, so that a client that hangs up (mid-stream
or while it waits) leaves a turn that finishes and is saved, as a closed chat tab does.

Its events go to the session's other clients (a chat page open on it) and, while the
request listens, to the request: a stream reads them from a queue, a completion that is not
streamed keeps only the steps it reports as `reasoning_content`.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import math
from collections.abc import AsyncIterator, Iterable
from typing import Any

from django.contrib.auth.models import User

from agent import failures
from agent.doors.openai.chat_request import CHANNEL, ChatRequest
from agent.doors.openai.errors import INVALID_REQUEST, SERVER_ERROR, OpenAIError
from agent.doors.openai.progress import Progress
from agent.doors.openai.shapes import DONE, KEEPALIVE, Reply
from agent.events import Event
from agent.turn import (
    GroupSink,
    ModelNotConfigured,
    OverBudget,
    SessionGone,
    SessionRef,
    TurnError,
    TurnOptions,
    TurnResult,
    run_turn,
)
from sessions_app.models import Session

logger = logging.getLogger(__name__)

# Seconds of silence in a stream (a long tool call) before a comment line keeps it alive.
KEEPALIVE_SECONDS = 15.0
# Chunks that come faster than one per 10 ms leave together, one send every 10 ms: a send
# costs the server more than a fast model's chunk does, and a reader sees no difference.
WINDOW_SECONDS = 0.01
STOPPED_TEXT = "Stopped."
# A turn's failure, by how the model call failed, as OpenAI would answer it.
_FAILURES = {
    "context_overflow": (400, INVALID_REQUEST, "context_length_exceeded"),
    "internal": (500, SERVER_ERROR, "internal_error"),
    "lost_lock": (500, SERVER_ERROR, "turn_overtaken"),
}

# Turns whose request went away are kept referenced until they end.
_running: set[asyncio.Task[TurnResult]] = set()


class DoorTurn:
    def __init__(self, chat: ChatRequest, *, user: User, session: Session, reply: Reply) -> None:
        self.chat = chat
        self.reply = reply
        self.progress = Progress()
        self.queue: asyncio.Queue[Event | None] = asyncio.Queue()
        # A stream reads the queue while its client is there; nothing else does.
        self.listening = chat.stream
        self.begun = asyncio.Event()
        self.group = GroupSink(session.pk)
        options = TurnOptions(
            tools=False if chat.choice.direct else None,
            history=chat.history,
            instructions=chat.instructions,
            temperature=chat.temperature,
            max_tokens=chat.max_tokens,
        )
        turn = run_turn(
            SessionRef(session.key, owner=user, pinned_id=session.pk),
            chat.content,
            channel=CHANNEL,
            emit=self._emit,
            model=chat.choice.model,
            options=options,
        )
        # In a context of its own: the request's sends its database calls to the request's
        # own thread, which stops taking them when the request ends, before the turn does.
        self.task = asyncio.get_running_loop().create_task(turn, context=contextvars.Context())
        _running.add(self.task)
        self.task.add_done_callback(_running.discard)
        self.task.add_done_callback(lambda _: self.queue.put_nowait(None))

    async def _emit(self, event: Event) -> None:
        self.begun.set()
        if self.listening:
            self.queue.put_nowait(event)
        else:
            self.progress.deltas(event)
        await self.group(event)

    async def started(self) -> None:
        """Wait for the turn to start; raise why it could not."""
        waiting = asyncio.ensure_future(self.begun.wait())
        try:
            await asyncio.wait([waiting, self.task], return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiting.cancel()
        if not self.begun.is_set():
            self.outcome()

    async def completion(self) -> dict[str, object]:
        """The whole answer, once the turn has ended (`chat.completion`)."""
        # Not awaited directly: a request cancelled by its client's leaving would cancel it.
        await asyncio.wait([self.task])
        result = self.outcome()
        return self.reply.completion(
            text=result.text if result else STOPPED_TEXT,
            reasoning="".join(self.progress.reasoning),
            finish=_finish(result),
            usage=result.usage if result else {},
        )

    async def stream(self) -> AsyncIterator[bytes]:
        """The answer as server-sent events, as the turn goes. It always ends with
        `data: [DONE]`: whatever fails on the way is an error event first, in OpenAI's
        shape, and a client is never left waiting on a stream that just stops."""
        try:
            try:
                yield self.reply.chunk({"role": "assistant", "content": ""})
                async for part in self._events():
                    yield part
                ending = self._ending()
            except Exception:
                # The turn itself goes on and is saved; only this stream of it broke.
                ref = failures.log_failure(logger, "a stream through the OpenAI door failed")
                error = OpenAIError(
                    500,
                    failures.internal_error(ref),
                    type=SERVER_ERROR,
                    code="internal_error",
                    retry=False,
                )
                ending = error.event() + DONE
            yield ending
        finally:
            # The client left, or has it all: the turn goes on without it.
            self.listening = False

    async def _events(self) -> AsyncIterator[bytes]:
        loop = asyncio.get_running_loop()
        sent_at = -math.inf
        while True:
            events: list[Event | None] = []
            if self.queue.empty():
                try:
                    events.append(await asyncio.wait_for(self.queue.get(), KEEPALIVE_SECONDS))
                except TimeoutError:
                    yield KEEPALIVE
                    continue
            # As the WebSocket door does: what comes within WINDOW_SECONDS of the last send
            # waits for the window's end and leaves with the rest, the text of a kind joined.
            wait = sent_at + WINDOW_SECONDS - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            while not self.queue.empty():
                events.append(self.queue.get_nowait())
            ended = None in events
            deltas = joined(
                delta
                for event in events
                if event is not None
                for delta in self.progress.deltas(event)
            )
            if deltas:
                yield b"".join(self.reply.chunk(delta) for delta in deltas)
                sent_at = loop.time()
            if ended:
                return

    def _ending(self) -> bytes:
        try:
            result = self.outcome()
        except OpenAIError as exc:
            return exc.event() + DONE
        text = result.text if result else STOPPED_TEXT
        rest = self.progress.rest_of(text)
        parts = [self.reply.chunk({"content": rest})] if rest else []
        parts.append(self.reply.chunk({}, _finish(result)))
        if self.reply.include_usage:
            parts.append(self.reply.usage_chunk(result.usage if result else {}))
        parts.append(DONE)
        return b"".join(parts)

    def outcome(self) -> TurnResult | None:
        """How the turn ended: its result, None when it was stopped, or the error that
        says why it failed."""
        if self.task.cancelled():
            return None
        try:
            result = self.task.result()
        except TurnError as exc:
            raise _refusal(exc) from None
        except Exception:
            ref = failures.log_failure(logger, "a turn through the OpenAI door failed")
            raise OpenAIError(
                500,
                failures.internal_error(ref),
                type=SERVER_ERROR,
                code="internal_error",
                retry=False,
            ) from None
        if result.status == "failed" and result.error_kind != "max_iterations":
            raise _failure(result)
        return result


def _finish(result: TurnResult | None) -> str:
    return "length" if result and result.error_kind == "max_iterations" else "stop"


def _refusal(error: TurnError) -> OpenAIError:
    """Why the turn could not start, in OpenAI's shape."""
    if isinstance(error, OverBudget):
        return over_budget(error)
    if isinstance(error, ModelNotConfigured):
        return OpenAIError(503, str(error), type=SERVER_ERROR, code="model_not_configured")
    if isinstance(error, SessionGone):
        return OpenAIError(409, str(error), code="session_deleted", retry=False)
    return OpenAIError(400, str(error), code="invalid_value", param=error.field)


def over_budget(error: OverBudget) -> OpenAIError:
    """A user whose daily budget is spent, as OpenAI answers a spent quota: a 429 that says
    when to come back, and that a client must not simply send again at once."""
    return OpenAIError(
        429,
        str(error),
        type="insufficient_quota",
        code="insufficient_quota",
        retry=False,
        headers={"Retry-After": str(error.retry_after)},
    )


def _failure(result: TurnResult) -> OpenAIError:
    """A turn that ran and failed: the model call that failed for good, most often. Its
    tools may have run: the client is told not to send it again as it stands."""
    status, kind, code = _FAILURES.get(
        result.error_kind or "", (502, SERVER_ERROR, f"upstream_{result.error_kind or 'error'}")
    )
    return OpenAIError(status, result.text, type=kind, code=code, retry=False)


def joined(deltas: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """`deltas` with each run of text of one kind (content, reasoning) made one delta."""
    merged: list[dict[str, Any]] = []
    for delta in deltas:
        last = merged[-1] if merged else None
        if last is not None and len(last) == len(delta) == 1 and last.keys() == delta.keys():
            (key,) = delta
            merged[-1] = {key: last[key] + delta[key]}
        else:
            merged.append(delta)
    return merged
