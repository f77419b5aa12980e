"""The loop's gate: which tool calls wait for a person before they run.

A turn's caller builds a `Gate` from its settings (`agent.turn.approvals`); the loop asks it,
for each model answer, where the calls stop for a person (`Gate.split`). The calls before
that run; the turn then waits, and its caller keeps the calls that wait (`WaitingCall`) as
state of its own. Once they are answered, the caller hands the loop the `Verdicts`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# What the person said of each call that waited, by call id: None, it runs; a text, the
# answer it gets instead of running.
Verdicts = Mapping[str, str | None]


@dataclass(frozen=True, slots=True)
class WaitingCall:
    id: str
    name: str
    # As the tool would get them: an object, or the text when it was no JSON object.
    arguments: dict[str, Any] | str
    # Its place among the calls of the model's answer.
    position: int


@dataclass(frozen=True, slots=True)
class Gate:
    """Which tools wait for a person before they run."""

    needed: Callable[[str], bool]
    # For a turn with no one to ask: the answer a call of such a tool (by name) gets at
    # once, instead of waiting.
    refusal: Callable[[str], str] | None = None
    # Tools the turn's client runs itself (an OpenAI client's own functions): a call of
    # one ends the turn there, handed over to the client, whose result continues it.
    external: frozenset[str] = frozenset()

    def waits(self, name: str) -> bool:
        """Whether a call of `name` waits for someone outside the turn, a person or the
        client."""
        return name in self.external or self.needed(name)

    def split(
        self, calls: Sequence[tuple[str, str]], verdicts: Verdicts
    ) -> tuple[int, dict[str, str | None]]:
        """Of the calls `(id, name)` of one answer, how many may go before one waits for a
        person (all of them when none does), and `verdicts` with the refusals of a turn
        that has no one to ask added."""
        decided = dict(verdicts)
        for index, (call_id, name) in enumerate(calls):
            if call_id in decided or not self.waits(name):
                continue
            if self.refusal is None or name in self.external:
                return index, decided
            decided[call_id] = self.refusal(name)
        return len(calls), decided


def unanswered(turn: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The calls (as the provider was sent them) of the turn's last answer with tool calls
    that have no result in it yet: those a turn that waited goes on with."""
    for index in range(len(turn) - 1, -1, -1):
        calls = turn[index].get("tool_calls") if turn[index].get("role") == "assistant" else None
        if calls:
            answered = {m.get("tool_call_id") for m in turn[index + 1 :] if m.get("role") == "tool"}
            return [call for call in calls if call["id"] not in answered]
    return []
