"""The event vocabulary: every frame a client can see, defined once.

Each event is a small frozen dataclass whose `type` and fields match the WebSocket frames
of the contract; `to_dict()` is the frame. Sinks are plain async callables taking an event,
so a door can print, send or collect them as it likes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar


@dataclass(frozen=True, slots=True)
class Event:
    type: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        frame: dict[str, Any] = {"type": self.type}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                frame[f.name] = value
        return frame


@dataclass(frozen=True, slots=True)
class History(Event):
    type: ClassVar[str] = "history"
    messages: list[dict[str, Any]]
    running: bool
    # Whether the conversation has older messages than these (`Earlier` brings them).
    has_more: bool | None = None


@dataclass(frozen=True, slots=True)
class Earlier(Event):
    """Older messages of the conversation, which a client asked for: the ones right before
    message `before`, oldest first, as `history` gives them."""

    type: ClassVar[str] = "earlier"
    before: int
    messages: list[dict[str, Any]]
    has_more: bool


@dataclass(frozen=True, slots=True)
class Version(Event):
    """An earlier version of the conversation, which a client asked for: message `id`, which
    an edit or a regeneration replaced, and the messages archived with it, oldest first, as
    `history` gives them."""

    type: ClassVar[str] = "version"
    id: int
    messages: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Archived(Event):
    """Message `id` (of run `run_id`) and every message after it left the conversation
    (kept on record, archived), because the user edited that message or regenerated its
    reply: clients take them out of what they show. `count`: how many."""

    type: ClassVar[str] = "archived"
    id: int
    count: int
    run_id: str | None = None


@dataclass(frozen=True, slots=True)
class ThinkingStarted(Event):
    type: ClassVar[str] = "thinking_started"
    run_id: str
    # The model the turn's replies come from.
    model: str | None = None
    # Whose message the turn answers (`{id, name}`), which a team chat's viewers see.
    author: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class StreamStart(Event):
    type: ClassVar[str] = "stream_start"
    msg_id: str


@dataclass(frozen=True, slots=True)
class StreamChunk(Event):
    type: ClassVar[str] = "stream_chunk"
    msg_id: str
    content: str


@dataclass(frozen=True, slots=True)
class StreamEnd(Event):
    type: ClassVar[str] = "stream_end"
    msg_id: str
    # Set when a retry threw the streamed text away: it is not part of the saved reply.
    discarded: bool | None = None
    # Set when /stop cut the reply short: the text so far is kept, and saved as stopped.
    stopped: bool | None = None


@dataclass(frozen=True, slots=True)
class Thinking(Event):
    type: ClassVar[str] = "thinking"
    content: str
    # Set on a progress note of ours (a failed model call about to be retried), which is
    # not the model's reasoning: clients show it as a line of its own.
    note: bool | None = None


@dataclass(frozen=True, slots=True)
class ToolCallEvent(Event):
    type: ClassVar[str] = "tool_call"
    id: str
    name: str
    arguments: Any


@dataclass(frozen=True, slots=True)
class ToolResult(Event):
    type: ClassVar[str] = "tool_result"
    id: str
    name: str
    result: str
    duration_ms: int | None = None


@dataclass(frozen=True, slots=True)
class ApprovalRequest(Event):
    """A tool call that waits for a person's yes or no; `id` is the call's."""

    type: ClassVar[str] = "approval_request"
    id: str
    run_id: str
    name: str
    arguments: Any
    # In a team chat, who may answer: `{author: {id, name} | null, team_admins: true}`.
    answerable_by: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ApprovalResolved(Event):
    """A call that waited is answered: by a person (`answered`), by its time running out
    (`timeout`), or with its turn (`stopped`, or `superseded` by a new message)."""

    type: ClassVar[str] = "approval_resolved"
    id: str
    run_id: str
    allow: bool
    reason: str
    always: bool | None = None


@dataclass(frozen=True, slots=True)
class AllowedTools(Event):
    """The tools answered "always" in the session changed (a call was answered so, or the
    user took one back): every tab shows the list, which no longer waits for a yes."""

    type: ClassVar[str] = "allowed_tools"
    tools: list[str]


@dataclass(frozen=True, slots=True)
class ThinkingFinished(Event):
    type: ClassVar[str] = "thinking_finished"
    run_id: str
    # What the run used and cost (`sessions_app.usage.run_usage`), once it is recorded.
    usage: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class MessageEvent(Event):
    type: ClassVar[str] = "message"
    role: str
    content: str
    run_id: str | None = None
    # On a turn's reply: what its run used and cost, as on `thinking_finished`; the model
    # that wrote it, and when (ISO 8601), as `history` gives them for stored replies.
    usage: dict[str, Any] | None = None
    # Set when the turn failed and this is what went wrong, not an answer: clients show it
    # as an error (and offer to try again), as `history` shows it with `"error": true`.
    error: bool | None = None
    model: str | None = None
    created: str | None = None
    # On a person's message: who wrote it (`{id, name}`).
    author: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class SubagentSpawned(Event):
    type: ClassVar[str] = "subagent_spawned"
    id: str
    label: str


@dataclass(frozen=True, slots=True)
class SubagentCompleted(Event):
    type: ClassVar[str] = "subagent_completed"
    id: str
    label: str
    status: str | None = None


@dataclass(frozen=True, slots=True)
class CronExecuted(Event):
    type: ClassVar[str] = "cron_executed"
    job_id: str
    status: str


@dataclass(frozen=True, slots=True)
class ModelChosen(Event):
    """The session's model changed (the page's picker, `/model NAME`): every tab shows it."""

    type: ClassVar[str] = "model"
    model: str


@dataclass(frozen=True, slots=True)
class ErrorEvent(Event):
    type: ClassVar[str] = "error"
    message: str
    # Seconds to wait before trying again, when the error is a rate limit.
    retry_after: int | None = None
    # Set when the error refuses the message the client just sent: it was not taken.
    refused: bool | None = None


@dataclass(frozen=True, slots=True)
class StopDone(Event):
    """The answer to a socket's `stop` frame, to that socket alone: what `/stop` said
    (how many turns it stopped). The page's stop button shows no reply for it: the stopped
    turn's own end says it all."""

    type: ClassVar[str] = "stopped"
    message: str


Emit = Callable[[Event], Awaitable[None]]


async def discard(event: Event) -> None:
    """A sink for callers that want the result only."""


@dataclass
class Collector:
    """A sink that keeps every event; for the API's waiting tasks and for tests."""

    events: list[Event] = field(default_factory=list)

    async def __call__(self, event: Event) -> None:
        self.events.append(event)

    def frames(self) -> list[dict[str, Any]]:
        return [event.to_dict() for event in self.events]

    def of_type(self, type_: str) -> list[Event]:
        return [event for event in self.events if event.type == type_]
