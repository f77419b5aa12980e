"""The chat socket's client frames beyond a message, a stop and a model, read and checked:
an answer to a tool call that waits for a person (`approve`), taking back an "always"
answer of the chat (`forget_always`), a request for older messages (`earlier`) or for an
earlier version of the conversation (`version`), and running the conversation again from
one of the user's messages (`regenerate`, `edit`). Each reader
gives what the frame asks for, or raises `BadFrame` with the frame's shape."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

APPROVE_FRAME = '{"type": "approve", "id": "<call id>", "allow": true|false, "always"?: true|false}'
EARLIER_FRAME = '{"type": "earlier", "before": <message id>, "to"?: <message id>}'
EDIT_FRAME = (
    '{"type": "edit", "id": <message id> (or "run_id": "<run id>"), "content": "<new text>"}'
)
REGENERATE_FRAME = '{"type": "regenerate"}'
VERSION_FRAME = '{"type": "version", "id": <message id>}'
FORGET_ALWAYS_FRAME = '{"type": "forget_always", "tool": "<tool name>"}'
# What the socket takes, for a frame of a type it does not know.
KNOWN_FRAMES = (
    'send {"type": "message", "content": "…"}, {"type": "stop"}, '
    '{"type": "approve", "id": "…", "allow": true|false}, '
    f"{REGENERATE_FRAME}, {EDIT_FRAME}, {EARLIER_FRAME}, {VERSION_FRAME} or "
    f"{FORGET_ALWAYS_FRAME}"
)
# The longest tool call id a client may answer for (`Approval.call_id`).
MAX_CALL_ID_CHARS = 128
# Longer than any tool's name (`Approval.name`) or glob a session's list holds.
MAX_TOOL_NAME_CHARS = 200
_LARGEST_ID = 2**63 - 1


class BadFrame(ValueError):
    """A frame of a known type whose fields are not what that type takes."""


@dataclass(frozen=True, slots=True)
class ApproveRequest:
    call_id: str
    allow: bool
    always: bool


@dataclass(frozen=True, slots=True)
class ForgetAlwaysRequest:
    tool: str


@dataclass(frozen=True, slots=True)
class EarlierRequest:
    before: int
    back_to: int | None


@dataclass(frozen=True, slots=True)
class RerunRequest:
    """Run the conversation again from a message of the user's (none named: the latest),
    edited to `content` or (None) as it was."""

    message_id: int | None = None
    run_id: UUID | None = None
    content: str | None = None


def _message_id(value: object) -> int | None:
    """A message id as a frame may give it: a positive integer (not a boolean)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= _LARGEST_ID:
        return value
    return None


def read_approve(frame: dict[str, Any]) -> ApproveRequest:
    call_id, allow, always = frame.get("id"), frame.get("allow"), frame.get("always", False)
    if (
        not isinstance(call_id, str)
        or not 0 < len(call_id) <= MAX_CALL_ID_CHARS
        or not isinstance(allow, bool)
        or not isinstance(always, bool)
    ):
        raise BadFrame(f"an answer to a tool call is {APPROVE_FRAME}")
    return ApproveRequest(call_id=call_id, allow=allow, always=always)


def read_forget_always(frame: dict[str, Any]) -> ForgetAlwaysRequest:
    tool = frame.get("tool")
    if not isinstance(tool, str) or not 0 < len(tool) <= MAX_TOOL_NAME_CHARS:
        raise BadFrame(f'take back an "always" with {FORGET_ALWAYS_FRAME}')
    return ForgetAlwaysRequest(tool=tool)


def read_earlier(frame: dict[str, Any]) -> EarlierRequest:
    before = _message_id(frame.get("before"))
    to = frame.get("to")
    back_to = None if to is None else _message_id(to)
    if before is None or (to is not None and back_to is None):
        raise BadFrame(f"ask for older messages with {EARLIER_FRAME}")
    return EarlierRequest(before=before, back_to=back_to)


@dataclass(frozen=True, slots=True)
class VersionRequest:
    """The earlier version of the conversation at message `message_id`, which an edit or a
    regeneration replaced."""

    message_id: int


def read_version(frame: dict[str, Any]) -> VersionRequest:
    message_id = _message_id(frame.get("id"))
    if message_id is None:
        raise BadFrame(f"ask for an earlier version with {VERSION_FRAME}")
    return VersionRequest(message_id=message_id)


def read_regenerate(frame: dict[str, Any]) -> RerunRequest:
    return RerunRequest()


def read_edit(frame: dict[str, Any]) -> RerunRequest:
    """The message to edit (by its id, or the run it started) and its new text. The text is
    checked later, by the rules every message follows."""
    content = frame.get("content")
    message_id, run_id = frame.get("id"), frame.get("run_id")
    if not isinstance(content, str) or (message_id is None) == (run_id is None):
        raise BadFrame(f"edit a message of yours with {EDIT_FRAME}")
    if message_id is not None:
        checked = _message_id(message_id)
        if checked is None:
            raise BadFrame(f"edit a message of yours with {EDIT_FRAME}")
        return RerunRequest(message_id=checked, content=content)
    try:
        run = UUID(run_id) if isinstance(run_id, str) and len(run_id) <= 64 else None
    except ValueError:
        run = None
    if run is None:
        raise BadFrame(f"edit a message of yours with {EDIT_FRAME}")
    return RerunRequest(run_id=run, content=content)
