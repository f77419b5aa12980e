"""A Responses API turn, answered in its shapes: a `response` object, or its events as the
turn goes (`response.created` first, `response.completed` or `response.failed` last).

The output holds, in order, what the turn did: the model's text as `message` items, the
agent's progress (its reasoning, its tool calls and their results) as `reasoning` items
between them, and the calls of the client's tools as `function_call` items at the end.
An answer not streamed holds the steps as one reasoning item and the answer as one message.
Each answer is kept (unless `store` is false), for `GET /v1/responses/{id}` and for a
request that continues it by `previous_response_id`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

from django.contrib.auth.models import User

from agent import failures
from agent.doors.openai.errors import OpenAIError
from agent.doors.openai.responses_shapes import (
    ResponseShape,
    call_item,
    message_item,
    new_id,
    reasoning_item,
    text_part,
)
from agent.doors.openai.shapes import KEEPALIVE
from agent.doors.openai.turns import ClientTurn
from agent.turn import TurnResult, keep_response
from sessions_app.models import Session

logger = logging.getLogger(__name__)

STOPPED_TEXT = "Stopped."


class ResponseTurn(ClientTurn):
    def __init__(
        self,
        content: str,
        *args: Any,
        shape: ResponseShape,
        user: User,
        session: Session,
        store: bool,
        **kwargs: Any,
    ) -> None:
        super().__init__(content, *args, user=user, session=session, **kwargs)
        self.shape = shape
        self.prompt = content
        self.keeping = (user, session) if store else None

    async def whole(self) -> dict[str, Any]:
        """The answer once the turn has ended."""
        result = await self.ended()
        output: list[dict[str, Any]] = []
        reasoning = "".join(self.progress.reasoning)
        if reasoning:
            output.append(reasoning_item(new_id("rs"), reasoning))
        text = result.text if result else STOPPED_TEXT
        if text:
            output.append(message_item(new_id("msg"), text))
        output += [call_item(call) for call in (result.handed_over if result else ())]
        answer = self._final(result, output)
        await self._keep(result, answer, text)
        return answer

    async def stream(self) -> AsyncIterator[bytes]:
        """The answer's events as the turn goes; the last is always `response.completed`,
        `response.incomplete` or `response.failed`."""
        items = _Items(self.shape)
        try:
            begun = self.shape.response(status="in_progress", output=[])
            yield self.shape.event("response.created", response=begun)
            yield self.shape.event("response.in_progress", response=begun)
            async for batch in self.events():
                if batch is None:
                    yield KEEPALIVE
                    continue
                parts = [
                    items.add(delta) for event in batch for delta in self.progress.deltas(event)
                ]
                if parts:
                    yield b"".join(parts)
            yield await self._ending(items)
        except Exception:
            # The turn itself goes on and is saved; only this stream of it broke.
            ref = failures.log_failure(logger, "a Responses stream failed")
            error = {"code": "server_error", "message": failures.internal_error(ref)}
            failed = self.shape.response(status="failed", output=items.output, error=error)
            yield self.shape.event("response.failed", response=failed)
        finally:
            self.listening = False

    async def _ending(self, items: _Items) -> bytes:
        try:
            result = self.outcome()
        except OpenAIError as exc:
            error = {"code": exc.code or "server_error", "message": exc.message}
            failed = self.shape.response(status="failed", output=items.output, error=error)
            return items.close() + self.shape.event("response.failed", response=failed)
        text = result.text if result else STOPPED_TEXT
        handed_over = result is not None and bool(result.handed_over)
        rest = self.progress.rest_of(text) if text or not handed_over else ""
        parts = [items.add({"content": rest})] if rest else []
        parts.append(items.close())
        for call in result.handed_over if result else ():
            parts.append(items.call(call))
        answer = self._final(result, items.output)
        kind = "response.incomplete" if answer["status"] == "incomplete" else "response.completed"
        parts.append(self.shape.event(kind, response=answer))
        await self._keep(result, answer, items.text())
        return b"".join(parts)

    def _final(self, result: TurnResult | None, output: list[dict[str, Any]]) -> dict[str, Any]:
        out_of_calls = result is not None and result.error_kind == "max_iterations"
        return self.shape.response(
            status="incomplete" if out_of_calls else "completed",
            output=output,
            usage=result.usage if result else {},
            incomplete="max_output_tokens" if out_of_calls else None,
        )

    async def _keep(self, result: TurnResult | None, answer: dict[str, Any], sent: str) -> None:
        if self.keeping is not None:
            user, session = self.keeping
            try:
                await keep_response(
                    response_id=self.shape.id,
                    owner_id=user.pk,
                    session_id=session.pk,
                    prompt=self.prompt,
                    body=answer,
                )
            except Exception:  # the answer stands; it cannot be read again or continued
                logger.exception("response %s could not be kept", self.shape.id)
        self.remembered(result, sent)


class _Items:
    """The output items of a stream, each opened as its first piece comes and closed when
    a piece of another kind does, with their events."""

    def __init__(self, shape: ResponseShape) -> None:
        self.shape = shape
        self.output: list[dict[str, Any]] = []
        self.open: dict[str, Any] | None = None
        self.pieces: list[str] = []
        self.said: list[str] = []

    def add(self, delta: dict[str, Any]) -> bytes:
        kind = "message" if "content" in delta else "reasoning"
        piece = delta.get("content", delta.get("reasoning_content", ""))
        parts = []
        if self.open is None or self.open["type"] != kind:
            parts.append(self.close())
            parts.append(self._open(kind))
        assert self.open is not None
        self.pieces.append(piece)
        at = {"item_id": self.open["id"], "output_index": len(self.output)}
        if kind == "message":
            self.said.append(piece)
            parts.append(
                self.shape.event(
                    "response.output_text.delta", **at, content_index=0, delta=piece, logprobs=[]
                )
            )
        else:
            parts.append(
                self.shape.event(
                    "response.reasoning_summary_text.delta", **at, summary_index=0, delta=piece
                )
            )
        return b"".join(parts)

    def _open(self, kind: str) -> bytes:
        item_id = new_id("msg" if kind == "message" else "rs")
        item = (message_item if kind == "message" else reasoning_item)(
            item_id, "", status="in_progress"
        )
        self.open, self.pieces = item, []
        at = {"item_id": item_id, "output_index": len(self.output)}
        added = self.shape.event(
            "response.output_item.added", output_index=len(self.output), item=item
        )
        if kind == "message":
            part = self.shape.event(
                "response.content_part.added", **at, content_index=0, part=text_part("")
            )
        else:
            part = self.shape.event(
                "response.reasoning_summary_part.added",
                **at,
                summary_index=0,
                part={"type": "summary_text", "text": ""},
            )
        return added + part

    def close(self) -> bytes:
        if self.open is None:
            return b""
        item, text = self.open, "".join(self.pieces)
        at = {"item_id": item["id"], "output_index": len(self.output)}
        if item["type"] == "message":
            done = message_item(item["id"], text)
            parts = self.shape.event(
                "response.output_text.done", **at, content_index=0, text=text, logprobs=[]
            ) + self.shape.event(
                "response.content_part.done", **at, content_index=0, part=text_part(text)
            )
        else:
            done = reasoning_item(item["id"], text)
            summary = {"type": "summary_text", "text": text}
            parts = self.shape.event(
                "response.reasoning_summary_text.done", **at, summary_index=0, text=text
            ) + self.shape.event(
                "response.reasoning_summary_part.done", **at, summary_index=0, part=summary
            )
        parts += self.shape.event(
            "response.output_item.done", output_index=len(self.output), item=done
        )
        self.output.append(done)
        self.open = None
        return parts

    def call(self, call: dict[str, str]) -> bytes:
        index = len(self.output)
        item = call_item(call)
        at = {"item_id": item["id"], "output_index": index}
        parts = [
            self.shape.event(
                "response.output_item.added",
                output_index=index,
                item=call_item(call, status="in_progress"),
            ),
            self.shape.event(
                "response.function_call_arguments.delta", **at, delta=call["arguments"]
            ),
            self.shape.event(
                "response.function_call_arguments.done",
                **at,
                name=call["name"],
                arguments=call["arguments"],
            ),
            self.shape.event("response.output_item.done", output_index=index, item=item),
        ]
        self.output.append(item)
        return b"".join(parts)

    def text(self) -> str:
        return "".join(self.said)
