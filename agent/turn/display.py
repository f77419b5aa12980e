"""The conversation as a chat shows it after a reload: the messages of `history` frames.

Stored messages are what the model is sent. While a turn ran, its chat showed a little
more than that and a little less, and a reload shows the same:

- a message the `message` tool delivered to the turn's own chat was shown as the agent's
  message. Its record is the tool call that sent it, with the result `SENT_HERE`; it is
  shown as a message of its own right after that call's result;
- a model call's text that repeats such a message of the same turn was never streamed
  (`agent.turn.delivery.RepeatScreen`) nor sent as the reply: its words are left out, its
  reasoning is kept (the chat showed that as it came).
"""

from __future__ import annotations

import json
from typing import Any

from agent.tools.messaging import SENT_HERE, MessageTool


def shown(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` (`sessions_app.selectors.messages_for_display`, oldest first) as the chat
    showed them."""
    sending: dict[str, str] = {}  # tool call id -> the text of a message tool call
    said: dict[str | None, set[str]] = {}  # run -> what it sent to this chat
    result: list[dict[str, Any]] = []
    for message in messages:
        role = message["role"]
        if role == "assistant":
            repeated = said.get(message.get("run_id"), set())
            text = (message.get("content") or "").strip()
            if text and text in repeated and not message.get("stopped"):
                if not message.get("tool_calls") and not message.get("reasoning_content"):
                    continue
                message = {**message, "content": None}
            for call in message.get("tool_calls") or []:
                content = _message_text(call)
                if content is not None:
                    sending[str(call.get("id"))] = content
        result.append(message)
        if role == "tool" and message.get("name") == MessageTool.name:
            content = sending.pop(str(message.get("tool_call_id")), None)
            if content is not None and message.get("content") == SENT_HERE:
                said.setdefault(message.get("run_id"), set()).add(content.strip())
                result.append(_delivered(message, content))
    return result


def _message_text(call: Any) -> str | None:
    """The text of a `message` tool call, or None for any other call."""
    if not isinstance(call, dict):
        return None
    function = call.get("function") or {}
    if function.get("name") != MessageTool.name:
        return None
    try:
        arguments = json.loads(function.get("arguments") or "{}")
    except (TypeError, ValueError):
        return None
    content = arguments.get("content") if isinstance(arguments, dict) else None
    return content if isinstance(content, str) else None


def _delivered(result: dict[str, Any], content: str) -> dict[str, Any]:
    """The message that the tool call answered by `result` showed: no row of its own, so no
    id."""
    return {
        "id": None,
        "role": "assistant",
        "content": content,
        "tool_calls": None,
        "tool_call_id": None,
        "name": None,
        "stopped": False,
        "reasoning_content": None,
        "run_id": result.get("run_id"),
        "created": result.get("created"),
    }
