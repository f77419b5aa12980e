"""The token budget: estimate what messages cost and trim history to fit the window.

Messages are handled in units: an assistant message with tool calls travels with the tool
results that answer it, so trimming never leaves a call without its result or a result
without its call. A trimmed history always starts at a user message.
"""

from __future__ import annotations

import json
from typing import Any

Message = dict[str, Any]

# About three characters per token errs on the safe side for code and most languages, and
# needs no tokenizer for every model litellm can reach.
CHARS_PER_TOKEN = 3


def estimate_tokens(payload: Any) -> int:
    return len(json.dumps(payload, ensure_ascii=False, default=str)) // CHARS_PER_TOKEN + 1


def units(history: list[Message]) -> list[list[Message]]:
    """Group messages so that tool calls and their results stay together."""
    grouped: list[list[Message]] = []
    for message in history:
        if message.get("role") == "tool" and grouped and _expects(grouped[-1], message):
            answered = {m.get("tool_call_id") for m in grouped[-1][1:]}
            if message.get("tool_call_id") not in answered:  # one result per call
                grouped[-1].append(message)
        else:
            grouped.append([message])
    return grouped


def _expects(unit: list[Message], result: Message) -> bool:
    head = unit[0]
    wanted = {call.get("id") for call in head.get("tool_calls") or ()}
    return head.get("role") == "assistant" and result.get("tool_call_id") in wanted


def repair(history: list[Message]) -> list[Message]:
    """Drop what a provider would reject: results without a call, calls without results.

    A turn that crashed or was stopped mid-tool may have left either behind.
    """
    kept: list[Message] = []
    for unit in units(history):
        head = unit[0]
        if head.get("role") == "tool":
            continue
        calls = head.get("tool_calls")
        if calls:
            answered = {m.get("tool_call_id") for m in unit[1:]}
            if not all(call.get("id") in answered for call in calls):
                continue
        kept.extend(unit)
    return start_at_user(kept)


def start_at_user(history: list[Message]) -> list[Message]:
    for index, message in enumerate(history):
        if message.get("role") == "user":
            return history[index:]
    return []


def trim_history(history: list[Message], budget_tokens: int) -> list[Message]:
    """The newest units of `history` that fit in `budget_tokens`, starting at a user message."""
    if budget_tokens <= 0:
        return []
    kept: list[list[Message]] = []
    used = 0
    for unit in reversed(units(history)):
        cost = estimate_tokens(unit)
        if used + cost > budget_tokens:
            break
        kept.append(unit)
        used += cost
    flat = [message for unit in reversed(kept) for message in unit]
    return start_at_user(flat)


def drop_oldest_half(history: list[Message]) -> list[Message]:
    """Emergency compression after the provider said the context overflowed."""
    grouped = units(history)
    flat = [m for unit in grouped[len(grouped) // 2 + len(grouped) % 2 :] for m in unit]
    return start_at_user(flat)
