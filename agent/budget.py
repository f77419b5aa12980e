"""The token budget: fit what a model call sends into the model's window.

Messages are handled in units: an assistant message with tool calls travels with the tool
results that answer it, so trimming never leaves a call without its result or a result
without its call. A trimmed history always starts at a user message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent.tokens import TokenCounter

# One message as the model is sent it: the OpenAI chat format (`Message.as_llm_message`).
LLMMessage = dict[str, Any]


def units(history: list[LLMMessage]) -> list[list[LLMMessage]]:
    """Group messages so that tool calls and their results stay together."""
    grouped: list[list[LLMMessage]] = []
    for message in history:
        if message.get("role") == "tool" and grouped and _expects(grouped[-1], message):
            answered = {m.get("tool_call_id") for m in grouped[-1][1:]}
            if message.get("tool_call_id") not in answered:  # one result per call
                grouped[-1].append(message)
        else:
            grouped.append([message])
    return grouped


def _expects(unit: list[LLMMessage], result: LLMMessage) -> bool:
    head = unit[0]
    wanted = {call.get("id") for call in head.get("tool_calls") or ()}
    return head.get("role") == "assistant" and result.get("tool_call_id") in wanted


def repair(history: list[LLMMessage]) -> list[LLMMessage]:
    """Drop what a provider would reject: results without a call, calls without results,
    and calls made twice.

    A turn that crashed or was stopped mid-tool may have left the first two behind. The third
    no write makes any more (a run's messages are numbered and saved once each), but rows
    saved twice before they were numbered are still in older sessions.
    """
    kept: list[LLMMessage] = []
    called: set[Any] = set()
    for unit in units(history):
        head = unit[0]
        if head.get("role") == "tool":
            continue
        calls = head.get("tool_calls")
        if calls:
            ids = {call.get("id") for call in calls}
            answered = {m.get("tool_call_id") for m in unit[1:]}
            if not ids <= answered or ids & called:
                continue
            called |= ids
        kept.extend(unit)
    return start_at_user(kept)


def start_at_user(history: list[LLMMessage]) -> list[LLMMessage]:
    for index, message in enumerate(history):
        if message.get("role") == "user":
            return history[index:]
    return []


# A tool result cut to fit keeps this much of its beginning.
SHORTENED_CHARS = 1_000


class ContextBudget:
    """What one model call may send: the window less the reserve (output tokens and tool
    definitions), filled newest first. The system prompt and the turn's user message always
    go; the turn's own tool results are shortened, then dropped with their calls, oldest
    first, before they could overflow; older history goes first of all, a unit at a time."""

    def __init__(self, *, window: int, reserve: int, counter: TokenCounter) -> None:
        self.window = window
        self.reserve = reserve
        self.counter = counter
        self.cap: int | None = None

    @property
    def limit(self) -> int:
        limit = self.window - self.reserve
        return min(limit, self.cap) if self.cap is not None else limit

    def tighten(self, *, window: int, sent: list[LLMMessage]) -> None:
        """After the provider said the context overflowed: take its window as discovered
        again, and send at most half of what was just sent."""
        self.window = window
        self.cap = min(self.limit, self.counter.messages(sent) // 2)

    async def fit(
        self, system: LLMMessage | None, history: list[LLMMessage], turn: list[LLMMessage]
    ) -> list[LLMMessage]:
        """The messages to send: `system` (if any), the newest of `history`, and `turn` (the
        user's message first, then what the turn added), within the limit where possible."""
        everything = [*_present(system), *history, *turn]
        if self.counter.messages(everything) <= self.limit:
            return everything
        # The estimate said no: count exactly, where the model's tokenizer is known.
        if await self.counter.load_exact() and self.counter.messages(everything) <= self.limit:
            return everything
        return fit(system, history, turn, limit=self.limit, count=self.counter.message)


def fit(
    system: LLMMessage | None,
    history: list[LLMMessage],
    turn: list[LLMMessage],
    *,
    limit: int,
    count: Callable[[LLMMessage], int],
) -> list[LLMMessage]:
    """`ContextBudget.fit` without the counting: what fits in `limit` tokens."""
    user, steps = turn[0], units(turn[1:])
    room = limit - sum(count(m) for m in _present(system)) - count(user)
    steps = _fit_steps(steps, room, count)
    room -= sum(count(m) for unit in steps for m in unit)
    kept: list[list[LLMMessage]] = []
    for unit in reversed(units(history)):
        cost = sum(count(m) for m in unit)
        if cost > room:
            break
        kept.append(unit)
        room -= cost
    older = start_at_user([m for unit in reversed(kept) for m in unit])
    return [*_present(system), *older, user, *(m for unit in steps for m in unit)]


def _present(system: LLMMessage | None) -> list[LLMMessage]:
    # A direct generation without the client's instructions has no system message at all.
    return [system] if system is not None else []


def _fit_steps(
    steps: list[list[LLMMessage]], room: int, count: Callable[[LLMMessage], int]
) -> list[list[LLMMessage]]:
    """The turn's own calls and results within `room`: oldest results shortened first,
    then oldest steps dropped whole; the newest step always stays."""

    def cost(units_: list[list[LLMMessage]]) -> int:
        return sum(count(m) for unit in units_ for m in unit)

    steps = list(steps)
    for index in range(len(steps)):
        if cost(steps) <= room:
            return steps
        steps[index] = [_shortened(m) for m in steps[index]]
    while len(steps) > 1 and cost(steps) > room:
        steps.pop(0)
    return steps


def _shortened(message: LLMMessage) -> LLMMessage:
    content = message.get("content")
    if message.get("role") != "tool" or not isinstance(content, str):
        return message
    if len(content) <= SHORTENED_CHARS:
        return message
    cut = len(content) - SHORTENED_CHARS
    note = f"\n[{cut} more characters cut to fit the context window]"
    return {**message, "content": content[:SHORTENED_CHARS] + note}
