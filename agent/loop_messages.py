"""What the loop says and sends, shaped: a model call's streamed deltas as events, the
tool calls as they go back to the provider and the groups they run in, the messages a turn
adds to its history, and a failed model call put plainly."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

from agent.budget import LLMMessage
from agent.cleantext import clean_value
from agent.events import Emit, StreamChunk, StreamEnd, StreamStart, Thinking
from agent.llm.client import LLMResponse, ToolCall
from agent.llm.error_kinds import LLMError
from agent.llm.tool_calls import unique_id


class StreamEvents:
    """Turns one model call's streamed deltas into stream_start/chunk/end events."""

    def __init__(self, emit: Emit) -> None:
        self.emit = emit
        self.msg_id = ""
        # The text of the current message so far.
        self.parts: list[str] = []
        # What the model has written in this call, its reasoning included.
        self.written: list[str] = []

    async def text(self, delta: str) -> None:
        if not self.msg_id:
            self.msg_id = uuid.uuid4().hex
            self.parts = []
            await self.emit(StreamStart(msg_id=self.msg_id))
        self.parts.append(delta)
        self.written.append(delta)
        await self.emit(StreamChunk(msg_id=self.msg_id, content=delta))

    def said(self) -> str:
        """The text streamed of the current message, which the person has been shown."""
        return "".join(self.parts) if self.msg_id else ""

    async def reasoning(self, delta: str) -> None:
        self.written.append(delta)
        await self.emit(Thinking(content=delta))

    async def retry(self, attempt: int, delay: float, error: LLMError) -> None:
        await self.end(discarded=True)
        await self.emit(Thinking(content=retry_note(attempt, delay, error), note=True))

    async def end(self, *, discarded: bool = False, stopped: bool = False) -> None:
        if self.msg_id:
            await self.emit(
                StreamEnd(
                    msg_id=self.msg_id,
                    discarded=True if discarded else None,
                    stopped=True if stopped else None,
                )
            )
            self.msg_id = ""


def retry_note(attempt: int, delay: float, error: LLMError) -> str:
    """A failed model call about to be retried, as a line of its own."""
    said = str(error).rstrip(". ")
    return f"{said[:1].upper()}{said[1:]}: retry {attempt} in {wait_text(delay)}."


def wait_text(seconds: float) -> str:
    """A wait as a person reads it: a short one to a tenth of a second ("0.6 s"; a whole
    "0 s" would read as no wait at all), a longer one in whole seconds ("12 s")."""
    seconds = max(0.0, seconds)
    if round(seconds, 1) < 10:
        return f"{seconds:.1f} s"
    return f"{round(seconds)} s"


def prepare_calls(
    calls: list[ToolCall],
) -> tuple[list[dict[str, Any]], list[dict[str, Any] | str]]:
    """The calls as they go back to the provider, and the arguments each tool gets.

    Arguments that are not a JSON object reach the registry as the raw text, which answers
    the model with the parse error; the provider is sent `{}` for them, since most reject
    a replayed call whose arguments do not parse.
    """
    sendable: list[dict[str, Any]] = []
    parsed: list[dict[str, Any] | str] = []
    for call in calls:
        try:
            value = json.loads(call.arguments) if call.arguments.strip() else {}
            # The client cleaned the arguments' text; what it parses to is looked at once
            # more, since the events, the approvals and the database all take it as it is.
            cleaned = clean_value(value)
        except (json.JSONDecodeError, RecursionError):
            value = cleaned = None
        if isinstance(cleaned, dict):
            parsed.append(cleaned)
            if cleaned is value:
                sendable.append(call.as_message_part())
            else:
                sendable.append(call.as_message_part(json.dumps(cleaned, ensure_ascii=False)))
        else:
            parsed.append(call.arguments)
            sendable.append(call.as_message_part("{}"))
    return sendable, parsed


def give_fresh_ids(calls: list[ToolCall], *conversations: list[LLMMessage]) -> None:
    """Give each call whose id a call of `conversations` (the history sent, the turn so far)
    already has one of its own. Some servers number every answer's calls from `call_0`:
    results are matched to calls by id, a call that waits for a person is recorded by it,
    and a history that holds a call twice is trimmed of the second (`budget.repair`)."""
    taken = {
        call.get("id")
        for messages in conversations
        for message in messages
        if message.get("role") == "assistant"
        for call in message.get("tool_calls") or ()
    }
    if not taken:
        return
    for call in calls:
        if call.id in taken:
            call.id = unique_id(call.id, taken)
        taken.add(call.id)


def batches(
    calls: list[ToolCall],
    parsed: list[dict[str, Any] | str],
    parallel_safe: Callable[[str], bool],
) -> list[list[tuple[ToolCall, dict[str, Any] | str]]]:
    """The calls in the groups they run in: each run of neighbouring calls that are safe
    side by side is one group, any other call a group of its own."""
    batches: list[list[tuple[ToolCall, dict[str, Any] | str]]] = []
    together = False
    for call, arguments in zip(calls, parsed, strict=True):
        safe = isinstance(arguments, dict) and parallel_safe(call.name)
        if safe and together:
            batches[-1].append((call, arguments))
        else:
            batches.append([(call, arguments)])
        together = safe
    return batches


def assistant_message(content: str | None, response: LLMResponse) -> LLMMessage:
    message: LLMMessage = {"role": "assistant", "content": content}
    if response.reasoning_content:
        message["reasoning_content"] = response.reasoning_content
    return message


def tool_message(call: ToolCall, output: str) -> LLMMessage:
    return {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": output}


def explain(error: LLMError, *, history_sent: bool = True, steps_sent: bool = False) -> str:
    """A failed model call as the person reads it: what failed, in the error's own fixed
    phrase (never the provider's words, which only the server's log keeps), and what to do.
    `history_sent`: whether the call that failed carried earlier messages of the
    conversation, which `/new` would clear; else this turn alone overflowed: the user's
    message, and the tool calls and results it made so far (`steps_sent`)."""
    said = str(error).rstrip(". ")
    if error.kind == "context_overflow" and not history_sent:
        if steps_sent:
            return (
                "Your message and what this turn's tools returned no longer fit the model's "
                "context window, even without the earlier conversation. Ask for less at a "
                "time: a shorter message, or smaller parts of the files."
            )
        return (
            "Your message is too long for the model's context window, even without the "
            "earlier conversation. Send a shorter message, or split it into parts."
        )
    if error.kind == "auth":
        advice = "Ask the site's operator to check the model's API key (AGENT_API_KEY)."
    elif error.kind == "context_overflow":
        advice = "Send a shorter message, or start afresh with /new."
    elif error.kind == "bad_request":
        advice = "Try another model, or ask the site's operator: the server's log has the details."
    elif error.kind == "transient":
        advice = "Try again in a moment."
    else:
        advice = "Try again; if it fails again, the site's operator finds the details in the log."
    return f"{said[:1].upper()}{said[1:]}. {advice}"


def call_hint(name: str, arguments: Any, *, width: int) -> str:
    """`exec(command='rm -rf build')`: a tool call in a line, each argument cut at `width`
    characters, for a person to follow along or to be asked about it."""
    if isinstance(arguments, dict):
        parts = []
        for key, value in arguments.items():
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            text = " ".join(str(text).split())
            if len(text) > width:
                text = text[: width - 1] + "…"
            parts.append(f"{key}={text!r}" if isinstance(value, str) else f"{key}={text}")
        return f"{name}({', '.join(parts)})"
    text = " ".join(str(arguments or "").split())
    return f"{name}({text[:width]})"
