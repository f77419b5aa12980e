"""A turn's events as the deltas of an OpenAI stream.

The model's text streams as `content`, as it is written. Everything else a turn does, the
model's reasoning, each tool call and its result, sub-agents starting and ending, streams
as `reasoning_content`, which clients that show a model's reasoning show as the steps it
took. The answer is the turn's final text: whatever of it did not stream (a slash
command's answer, the note of a turn that ran out of model calls) comes at the end.

Text the model wrote before it called tools has streamed as content by then, as the model
wrote it; a stream's content then holds it ahead of the answer, each part a paragraph of
its own, where a completion that is not streamed holds the answer alone.
"""

from __future__ import annotations

import json
from typing import Any

from agent.events import (
    Event,
    MessageEvent,
    StreamChunk,
    StreamStart,
    SubagentCompleted,
    SubagentSpawned,
    Thinking,
    ThinkingFinished,
    ThinkingStarted,
    ToolCallEvent,
    ToolResult,
)

# How much of a tool call's arguments and of its result a step shows.
SHOWN_CHARS = 500
PARAGRAPH = "\n\n"


class Progress:
    def __init__(self) -> None:
        self.reasoning: list[str] = []
        # Whether any content has streamed, and the current model call's text.
        self.streamed = False
        self.call_text: list[str] = []
        self.in_turn = False
        # What the model sent this conversation with the `message` tool.
        self.delivered: list[str] = []

    def deltas(self, event: Event) -> list[dict[str, Any]]:
        """The deltas `event` makes, in order (most events make none or one)."""
        if isinstance(event, StreamChunk):
            before = PARAGRAPH if self.streamed and not self.call_text else ""
            self.call_text.append(event.content)
            self.streamed = True
            return [{"content": before + event.content}]
        if isinstance(event, StreamStart):
            self.call_text = []
            return []
        if isinstance(event, ThinkingStarted | ThinkingFinished):
            self.in_turn = isinstance(event, ThinkingStarted)
            return []
        if isinstance(event, MessageEvent):
            return self._message(event)
        step = _step(event)
        if not self.reasoning:
            step = step.lstrip("\n")  # the first step opens the reasoning: no gap before it
        elif isinstance(event, Thinking) and event.note and self.reasoning[-1].endswith("\n"):
            step = step[1:]  # a note right after a line's end: no blank line between
        if not step:
            return []
        self.reasoning.append(step)
        return [{"reasoning_content": step}]

    def rest_of(self, answer: str) -> str:
        """What of the turn's final text `answer` has not streamed yet."""
        if "".join(self.call_text) == answer or answer in self.delivered:
            return ""
        return (PARAGRAPH if self.streamed else "") + answer

    def _message(self, event: MessageEvent) -> list[dict[str, Any]]:
        # In a turn, an answer of the agent's is one it sent with the `message` tool: the
        # turn's final answer comes after the turn, and the caller has it as the result.
        if not self.in_turn or event.role != "assistant":
            return []
        before = PARAGRAPH if self.streamed else ""
        self.streamed = True
        self.call_text = []
        self.delivered.append(event.content)
        return [{"content": before + event.content}]


def _step(event: Event) -> str:
    if isinstance(event, Thinking):
        # A note of ours (a retry) is a line of its own, not part of the model's reasoning.
        return f"\n{event.content}\n" if event.note else event.content
    if isinstance(event, ToolCallEvent):
        arguments = event.arguments
        shown = arguments if isinstance(arguments, str) else json.dumps(arguments)
        return f"\n\n→ {event.name} {_short(shown)}\n"
    if isinstance(event, ToolResult):
        return f"← {event.name}: {_short(event.result)}\n"
    if isinstance(event, SubagentSpawned):
        return f"\n\n→ sub-agent {event.label} started\n"
    if isinstance(event, SubagentCompleted):
        return f"← sub-agent {event.label}: {event.status or 'ended'}\n"
    return ""


def _short(text: str) -> str:
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + " …"
