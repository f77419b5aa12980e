"""A chat completion's turn, answered in chat completions' shapes: a `chat.completion`, or
`chat.completion.chunk` events that always end with `data: [DONE]`.

A turn that ended calling the client's own tools answers as OpenAI does: the calls as
`tool_calls` (streamed as `tool_calls` deltas) and `finish_reason: "tool_calls"`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable
from typing import Any

from agent import failures
from agent.doors.openai.chat_request import ChatRequest
from agent.doors.openai.errors import SERVER_ERROR, OpenAIError
from agent.doors.openai.shapes import DONE, KEEPALIVE, Reply
from agent.doors.openai.turns import ClientTurn, client_options
from agent.turn import TurnOptions, TurnResult

logger = logging.getLogger(__name__)

STOPPED_TEXT = "Stopped."


class ChatTurn(ClientTurn):
    def __init__(self, chat: ChatRequest, reply: Reply, options: TurnOptions, **where: Any) -> None:
        super().__init__(
            chat.conversation.content,
            options,
            model=chat.choice.model,
            stream=chat.stream,
            **where,
        )
        self.reply = reply
        # Whether the client asked for the answer's log probabilities.
        self.logprobs = bool(dict(chat.params).get("logprobs"))

    async def completion(self) -> dict[str, object]:
        """The whole answer, once the turn has ended (`chat.completion`)."""
        result = await self.ended()
        text = result.text if result else STOPPED_TEXT
        calls = tool_calls(result)
        answer = self.reply.completion(
            text=text,
            reasoning="".join(self.progress.reasoning),
            finish=finish_reason(result),
            usage=result.usage if result else {},
            tool_calls=calls,
            logprobs=result.logprobs if result and self.logprobs else None,
        )
        self.remembered(result, text)
        return answer

    async def stream(self) -> AsyncIterator[bytes]:
        """The answer as server-sent events, as the turn goes. It always ends with
        `data: [DONE]`: whatever fails on the way is an error event first, in OpenAI's
        shape, and a client is never left waiting on a stream that just stops."""
        sent: list[str] = []
        try:
            try:
                yield self.reply.chunk({"role": "assistant", "content": ""})
                async for batch in self.events():
                    if batch is None:
                        yield KEEPALIVE
                        continue
                    deltas = joined(
                        delta for event in batch for delta in self.progress.deltas(event)
                    )
                    sent.extend(delta["content"] for delta in deltas if "content" in delta)
                    if deltas:
                        yield b"".join(self.reply.chunk(delta) for delta in deltas)
                ending, result = self._ending(sent)
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
                ending, result = error.event() + DONE, None
            self.remembered(result, "".join(sent))
            yield ending
        finally:
            # The client left, or has it all: the turn goes on without it.
            self.listening = False

    def _ending(self, sent: list[str]) -> tuple[bytes, TurnResult | None]:
        try:
            result = self.outcome()
        except OpenAIError as exc:
            return exc.event() + DONE, None
        text = result.text if result else STOPPED_TEXT
        # An answer that only called the client's tools has no text of its own to add.
        handed_over = result is not None and bool(result.handed_over)
        rest = self.progress.rest_of(text) if text or not handed_over else ""
        parts = [self.reply.chunk({"content": rest})] if rest else []
        sent.append(rest)
        calls = tool_calls(result)
        if calls:
            deltas = [{"index": index, **call} for index, call in enumerate(calls)]
            parts.append(self.reply.chunk({"tool_calls": deltas}))
        logprobs = result.logprobs if result and self.logprobs else None
        parts.append(self.reply.chunk({}, finish_reason(result), logprobs=logprobs))
        if self.reply.include_usage:
            parts.append(self.reply.usage_chunk(result.usage if result else {}))
        parts.append(DONE)
        return b"".join(parts), result


def turn_options(chat: ChatRequest) -> TurnOptions:
    """What a chat completion asks of its turn."""
    return client_options(
        chat.conversation,
        direct=chat.choice.direct,
        tools=chat.tools,
        params=chat.params,
        temperature=chat.temperature,
        max_tokens=chat.max_tokens,
    )


def tool_calls(result: TurnResult | None) -> list[dict[str, Any]]:
    """The calls of the client's tools the turn ended with, in OpenAI's shape."""
    if result is None:
        return []
    return [
        {
            "id": call["id"],
            "type": "function",
            "function": {"name": call["name"], "arguments": call["arguments"]},
        }
        for call in result.handed_over
    ]


def finish_reason(result: TurnResult | None) -> str:
    if result is not None and result.handed_over:
        return "tool_calls"
    return "length" if result and result.error_kind == "max_iterations" else "stop"


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
