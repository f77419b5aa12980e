"""One request's turn: run as a task of its own, so that a client that hangs up (mid-stream
or while it waits) leaves a turn that finishes and is saved, as a closed chat tab does.

Its events go to the session's other clients (a chat page open on it) and, while the
request listens, to the request: a stream reads them from a queue, an answer that is not
streamed keeps only the steps it reports as reasoning. `ClientTurn` is the part both of
the door's protocols share; `ChatTurn` answers in chat completions' shapes, and
`responses.ResponseTurn` in the Responses API's.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import math
from collections.abc import AsyncIterator, Callable
from typing import Any

from django.contrib.auth.models import User

from agent import failures
from agent.doors.openai.chat_messages import Conversation
from agent.doors.openai.chat_request import CHANNEL
from agent.doors.openai.chat_tools import ClientTools
from agent.doors.openai.errors import INVALID_REQUEST, SERVER_ERROR, OpenAIError
from agent.doors.openai.progress import Progress
from agent.events import Event
from agent.turn import (
    Continuation,
    GroupSink,
    ModelNotConfigured,
    OverBudget,
    SessionGone,
    SessionRef,
    TurnError,
    TurnOptions,
    TurnResult,
    prepare_options,
    run_turn,
)
from sessions_app.models import Session

logger = logging.getLogger(__name__)

# Seconds of silence in a stream (a long tool call) before a comment line keeps it alive.
KEEPALIVE_SECONDS = 15.0
# Chunks that come faster than one per 10 ms leave together, one send every 10 ms: a send
# costs the server more than a fast model's chunk does, and a reader sees no difference.
WINDOW_SECONDS = 0.01
# A turn's failure, by how the model call failed, as OpenAI would answer it.
_FAILURES = {
    "context_overflow": (400, INVALID_REQUEST, "context_length_exceeded"),
    "internal": (500, SERVER_ERROR, "internal_error"),
    "lost_lock": (500, SERVER_ERROR, "turn_overtaken"),
}

# Turns whose request went away are kept referenced until they end.
_running: set[asyncio.Task[TurnResult]] = set()


# Called once a turn answered, with the text the client got: where the door remembers
# the conversation (`threads`).
Remember = Callable[[str], None]


def client_options(
    conversation: Conversation,
    *,
    direct: bool,
    tools: ClientTools,
    params: tuple[tuple[str, Any], ...],
    temperature: float | None,
    max_tokens: int | None,
    stored_history: bool = False,
) -> TurnOptions:
    """What a client's request asks of its turn: the agent's or a direct generation, the
    conversation it sent (or, `stored_history`, the one kept on the server), the client's
    tools and parameters, and no one to ask while it runs (a tool that waits for a person's
    yes is refused at once: an API client cannot answer)."""
    return TurnOptions(
        tools=False if direct else None,
        history=None if stored_history else conversation.history,
        instructions=conversation.instructions,
        temperature=temperature,
        max_tokens=max_tokens,
        client_tools=tools.definitions,
        tool_choice=tools.choice,
        params=params,
        attachments=conversation.attachments,
        continuation=None
        if conversation.turn is None
        else Continuation(conversation.turn, conversation.results),
        unattended=True,
    )


class ClientTurn:
    """A turn run for one request of the door's, with `options`, on `model`."""

    def __init__(
        self,
        content: str,
        options: TurnOptions,
        *,
        model: str | None,
        stream: bool,
        user: User,
        session: Session,
        remember: Remember | None = None,
    ) -> None:
        self.progress = Progress()
        self.queue: asyncio.Queue[Event | None] = asyncio.Queue()
        # A stream reads the queue while its client is there; nothing else does.
        self.listening = stream
        self.begun = asyncio.Event()
        self.group = GroupSink(session.pk)
        self.remember = remember
        turn = run_turn(
            SessionRef(session.key, owner=user, pinned_id=session.pk),
            content,
            channel=CHANNEL,
            emit=self._emit,
            model=model,
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

    async def ended(self) -> TurnResult | None:
        """The turn's outcome (`outcome`) once it has ended."""
        # Not awaited directly: a request cancelled by its client's leaving would cancel it.
        await asyncio.wait([self.task])
        return self.outcome()

    def remembered(self, result: TurnResult | None, sent: str) -> None:
        """Keep where the conversation continues, now that the client has the answer."""
        if self.remember is not None and result is not None and result.success:
            self.remember(sent)

    async def events(self) -> AsyncIterator[list[Event] | None]:
        """The turn's events as they come, in batches: each batch is what came within
        WINDOW_SECONDS of the last (a send costs the server more than a fast model's chunk
        does, and a reader sees no difference); None after KEEPALIVE_SECONDS of silence,
        for the stream to say it is alive. It ends when the turn does."""
        loop = asyncio.get_running_loop()
        sent_at = -math.inf
        while True:
            events: list[Event | None] = []
            if self.queue.empty():
                try:
                    events.append(await asyncio.wait_for(self.queue.get(), KEEPALIVE_SECONDS))
                except TimeoutError:
                    yield None
                    continue
            wait = sent_at + WINDOW_SECONDS - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            while not self.queue.empty():
                events.append(self.queue.get_nowait())
            yield [event for event in events if event is not None]
            sent_at = loop.time()
            if None in events:
                return

    def outcome(self) -> TurnResult | None:
        """How the turn ended: its result, None when it was stopped, or the error that
        says why it failed."""
        if self.task.cancelled():
            return None
        try:
            result = self.task.result()
        except TurnError as exc:
            raise refusal(exc) from None
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


async def prepared(options: TurnOptions, *, user: User, model: str | None) -> TurnOptions:
    """`prepare_options`, its refusals in OpenAI's shape."""
    try:
        return await prepare_options(options, owner=user, model=model)
    except TurnError as exc:
        raise refusal(exc) from None


def refusal(error: TurnError) -> OpenAIError:
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
