"""A run's trace: each model call and tool call of its turn, in order, with how long it took,
how it failed, and what a model call cost (`Run.trace`).

The loop reports each call as it ends (`agent.loop.Steps`); `TraceRecorder` only takes a
note of it. Nothing is written for a step alone: the turn's message log saves the trace so
far with a batch of messages it writes anyway, and the run's ending (or its wait for a
person) saves the rest, so tracing adds no database round trip to a model call or a tool
call. It goes with at most one batch a second (SAVE_EVERY), none in a turn's first second,
and on its own when no batch comes by then: rewriting it with every batch made each model
round trip about 6 % slower (bench/loop_overhead.py, trace on vs off). So a quick turn's
trace is written once, with its ending; a turn that is stopped keeps every step it made,
and one whose process dies keeps all but its last second's.

An entry: `kind` (`model` or `tool`), `name` (the model id or the tool's name), `started`
(ISO 8601, UTC), `ms`, `error` (None, or why it failed; `stopped` for a call the turn was
stopped in), and for a model call `tokens` (None when the provider counted none) and `cost`
(USD, None when the price is unknown); a tool call also keeps its `call_id`.
"""

from __future__ import annotations

import bisect
import time
from datetime import UTC, datetime
from typing import Any

from agent.llm import LLMResponse, ToolCall
from agent.loop import STOPPED_STEP
from sessions_app.models import Run

Step = dict[str, Any]

# The most of a failed tool's answer an entry keeps as its error.
ERROR_CHARS = 300
TOKEN_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")
# The least time between two saves of a running turn's trace, in seconds.
SAVE_EVERY = 1.0


class TraceRecorder:
    """`agent.loop.Steps` for one run: its entries so far (after `earlier`, what the run had
    recorded before this turn), and whether some are not saved yet."""

    def __init__(self, earlier: list[Step] | None = None) -> None:
        self.steps: list[Step] = list(earlier or [])
        self._first = len(self.steps)
        # When each entry of this turn started: side-by-side tool calls end in any order,
        # and are listed in the order they started, which is the order the model gave them.
        self._starts: list[float] = []
        self._unsaved = False
        self._saved_at = time.monotonic()

    def model_call(
        self,
        *,
        model: str,
        started: float,
        ms: int,
        response: LLMResponse | None,
        error: str | None,
    ) -> None:
        usage = response.usage if response is not None else {}
        self._add(
            started,
            {
                "kind": "model",
                "name": model,
                "started": _iso(started),
                "ms": ms,
                "error": error,
                "tokens": {key: int(usage.get(key, 0)) for key in TOKEN_KEYS} if usage else None,
                "cost": response.cost if response is not None else None,
            },
        )

    def tool_call(self, *, call: ToolCall, started: float, ms: int, output: str | None) -> None:
        self._add(
            started,
            {
                "kind": "tool",
                "name": call.name,
                "call_id": call.id,
                "started": _iso(started),
                "ms": ms,
                "error": _tool_error(output),
            },
        )

    def _add(self, started: float, entry: Step) -> None:
        at = bisect.bisect_right(self._starts, started)
        self._starts.insert(at, started)
        self.steps.insert(self._first + at, entry)
        self._unsaved = True

    def unsaved(self) -> list[Step] | None:
        """The whole trace, if an entry was added since it was last handed out and it may
        be saved now (`due_in`), else None: the message log saves it. A copy: the write
        happens in another thread while the turn goes on."""
        if self.due_in() != 0:
            return None
        self._unsaved, self._saved_at = False, time.monotonic()
        return list(self.steps)

    def due_in(self) -> float | None:
        """In how many seconds the entries not saved yet may be; None when there are none."""
        if not self._unsaved:
            return None
        return max(0.0, self._saved_at + SAVE_EVERY - time.monotonic())

    def everything(self) -> list[Step]:
        return list(self.steps)


def _tool_error(output: str | None) -> str | None:
    # Tools never raise: they answer the model with `Error: …`, which is their failure.
    if output is None:
        return STOPPED_STEP
    if not output.startswith("Error"):
        return None
    reason = output.removeprefix("Error").lstrip(":").strip().splitlines()
    return (reason[0] if reason else "Error")[:ERROR_CHARS]


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="microseconds")


def public(entry: Step) -> Step:
    """An entry as the task API shows it."""
    shown = {key: entry.get(key) for key in ("kind", "name", "started", "ms", "error")}
    if entry.get("kind") == "model":
        shown["tokens"] = entry.get("tokens")
        shown["cost"] = entry.get("cost")
    return shown


def run_trace(run: Run) -> list[Step]:
    """`run`'s trace as the task API shows it."""
    return [public(entry) for entry in run.trace or []]
