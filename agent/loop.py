"""The loop: call the model, run the tools it asks for, feed the results back, repeat.

Messages and a tool registry go in, events come out through `emit`, a `LoopResult` comes
back. Each message the turn produces is handed to `on_message` as soon as it exists, so a
turn that is stopped or crashes has already saved everything up to that point. Each model
call and tool call is reported to `steps`, if given, once it has ended (the run's trace).
Nothing here knows about Django, channels or HTTP.

A caller may say which tools wait for a person (`agent.gate`). A turn whose model asks for
one runs the calls before it, then ends `waiting` with the calls that wait: no coroutine is
kept for it. Once the answers are in, `resume` goes on from what the turn had said so far.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from agent.budget import ContextBudget, LLMMessage
from agent.events import Emit
from agent.gate import Gate, Verdicts, WaitingCall, unanswered
from agent.llm.client import LLM, LLMResponse, ToolCall
from agent.llm.error_kinds import LLMError
from agent.loop_messages import (
    StreamEvents,
    assistant_message,
    explain,
    give_fresh_ids,
    prepare_calls,
)
from agent.loop_tools import AnswerCalls, Tools, ToolSteps

logger = logging.getLogger(__name__)

OnMessage = Callable[[LLMMessage, dict[str, int] | None], Awaitable[None]]
Status = Literal["succeeded", "failed", "waiting"]

EMPTY_REPLY = "(The model returned an empty reply.)"
# The failures the agent tells in its own words, saved as its message (a spent budget, the
# limit of model calls): its reply to the person, unlike a failure that leaves the turn
# without one, which a chat shows as an error.
SPOKEN_FAILURES = frozenset({"halted", "max_iterations"})


@dataclass
class LoopResult:
    text: str
    status: Status
    iterations: int
    tools_used: list[str] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    cost: float | None = None
    error: str | None = None
    error_kind: str | None = None
    # With status "waiting": the calls that wait for a person, in order.
    waiting: list[WaitingCall] = field(default_factory=list)
    # The calls of the client's own tools the turn ended with, in order: the client runs
    # them, and its results continue the turn (`resume`). `text` is what the model wrote
    # beside them.
    handed_over: list[WaitingCall] = field(default_factory=list)
    # The log probabilities of the last answer's text, when the caller asked for them.
    logprobs: list[Any] = field(default_factory=list)


class Steps(ToolSteps, Protocol):
    """Where the loop reports each model call and tool call once it has ended, stopped or
    failed: `started` is the wall clock (`time.time()`) at its start. Called on the event
    loop, between two awaits of the turn: it only takes a note."""

    def model_call(
        self,
        *,
        model: str,
        started: float,
        ms: int,
        response: LLMResponse | None,
        error: str | None,
    ) -> None: ...


class Spending(Protocol):
    """What a turn may spend on model calls (its user's daily budget, say). Before each
    call, `reserve` is told the tokens it sends (messages and tool definitions) and what the
    turn did so far, and answers None to go on, or the reply that ends the turn there; after
    a call that went on, `settle` is told what it cost (None: unknown, or it failed). A call
    stopped midway is not settled: the turn's end lets go of all the turn held."""

    async def reserve(self, prompt_tokens: int, done: LoopResult) -> str | None: ...

    async def settle(self, cost: float | None) -> None: ...


STOPPED_STEP = "stopped"


async def _ignore(message: LLMMessage, usage: dict[str, int] | None) -> None:
    return None


class AgentLoop:
    def __init__(
        self,
        *,
        llm: LLM,
        tools: Tools,
        emit: Emit,
        max_iterations: int,
        budget: ContextBudget,
        on_message: OnMessage | None = None,
        gate: Gate | None = None,
        steps: Steps | None = None,
        spending: Spending | None = None,
        tool_choice: str | dict[str, Any] | None = None,
    ) -> None:
        self.llm = llm
        self.tools = tools
        self.emit = emit
        self.max_iterations = max_iterations
        self.on_message = on_message or _ignore
        self.budget = budget
        self.gate = gate
        self.steps = steps
        self.spending = spending
        # The caller's choice of tool for the first model call (a client's `tool_choice`);
        # the calls after it choose freely, or a forced tool would be called forever.
        self.tool_choice = tool_choice
        # The tokens of the tool definitions every call sends, once counted.
        self._definition_tokens: int | None = None
        self.result = LoopResult(text="", status="succeeded", iterations=0)

    async def run(
        self, system: LLMMessage | None, history: list[LLMMessage], user: LLMMessage
    ) -> LoopResult:
        """Run one turn. `user` is the new message; each model call gets as much of
        `history` as the budget lets in."""
        turn: list[LLMMessage] = [user]
        # Kept on the loop, so a caller whose turn was cancelled can still read the counts.
        result = self.result = LoopResult(text="", status="succeeded", iterations=0)
        return await self._iterate(system, history, turn, result)

    async def resume(
        self,
        system: LLMMessage | None,
        history: list[LLMMessage],
        turn: list[LLMMessage],
        verdicts: Verdicts,
        *,
        done: LoopResult,
    ) -> LoopResult:
        """Go on with a turn that waited for a person. `turn` is what it said so far: its
        user message, then its messages up to the model's answer whose calls waited and the
        results of those that ran before them; `verdicts` are the person's answers, and
        `done` what the turn had done (iterations, tools, usage)."""
        turn = list(turn)
        result = self.result = done
        result.status, result.waiting = "succeeded", []
        calls = [
            ToolCall(part["id"], part["function"]["name"], part["function"].get("arguments", ""))
            for part in unanswered(turn)
        ]
        if await self._act(turn, calls, prepare_calls(calls)[1], result, verdicts):
            return result
        return await self._iterate(system, history, turn, result)

    async def _iterate(
        self,
        system: LLMMessage | None,
        history: list[LLMMessage],
        turn: list[LLMMessage],
        result: LoopResult,
    ) -> LoopResult:
        compressed = False
        while result.iterations < self.max_iterations:
            messages = await self.budget.fit(system, history, turn)
            if self.spending is not None:
                halt = await self.spending.reserve(self._tokens_sent(messages), result)
                if halt is not None:
                    return await self._halted(turn, result, halt)
            result.iterations += 1
            try:
                response = await self._call_model(turn, messages)
            except LLMError as error:
                if self.spending is not None:
                    await self.spending.settle(None)
                if error.kind == "context_overflow" and not compressed:
                    # The count was off for this model: look at the window again, send at
                    # most half as much, and try once more before giving up.
                    logger.warning("context overflow; sending the newer half and trying again")
                    window = await self.llm.context_window(refresh=True)
                    self.budget.tighten(window=window, sent=messages)
                    compressed = True
                    result.iterations -= 1
                    continue
                sent = {id(message) for message in messages}
                history_sent = any(id(message) in sent for message in history)
                return self._failed(result, error, history_sent=history_sent, turn=turn)
            _add_usage(result, response.usage, response.cost)
            if self.spending is not None:
                await self.spending.settle(response.cost)

            if not response.tool_calls:
                result.text = response.content or EMPTY_REPLY
                result.logprobs = response.logprobs
                await self._record(turn, assistant_message(result.text, response), response.usage)
                return result

            give_fresh_ids(response.tool_calls, history, turn)
            sendable, parsed = prepare_calls(response.tool_calls)
            assistant = assistant_message(response.content or None, response)
            assistant["tool_calls"] = sendable
            await self._record(turn, assistant, response.usage)
            if await self._act(turn, response.tool_calls, parsed, result, {}):
                if result.handed_over:
                    result.text = response.content
                return result

        result.status = "failed"
        result.error = f"reached the limit of {self.max_iterations} model calls in one turn"
        result.error_kind = "max_iterations"
        result.text = (
            f"I stopped after {self.max_iterations} model calls without reaching an answer "
            "(the AGENT_MAX_ITERATIONS limit). Ask me to continue, or split the task up."
        )
        await self._record(turn, {"role": "assistant", "content": result.text}, None)
        return result

    def _tokens_sent(self, messages: list[LLMMessage]) -> int:
        counter = self.budget.counter
        if self._definition_tokens is None:
            definitions = self.tools.definitions()
            self._definition_tokens = counter.payload(definitions) if definitions else 0
        return counter.messages(messages) + self._definition_tokens

    async def _call_model(self, turn: list[LLMMessage], messages: list[LLMMessage]) -> LLMResponse:
        stream = StreamEvents(self.emit)
        started, clock = time.time(), time.perf_counter()
        choice, self.tool_choice = self.tool_choice or "auto", None
        try:
            response = await self.llm.stream(
                messages,
                self.tools.definitions() or None,
                on_text=stream.text,
                on_reasoning=stream.reasoning,
                on_retry=stream.retry,
                tool_choice=choice,
            )
        except asyncio.CancelledError:
            self._model_step(started, clock, None, STOPPED_STEP)
            # Stopped mid-reply: what the person already read stays, in the history (marked
            # stopped) and in the model's next call.
            said = stream.said()
            await stream.end(stopped=bool(said.strip()))
            await self._count_cut(messages, "".join(stream.written))
            if said.strip():
                await self._record(
                    turn, {"role": "assistant", "content": said, "stopped": True}, None
                )
            raise
        except BaseException as exc:
            self._model_step(started, clock, None, str(exc) or type(exc).__name__)
            await stream.end(discarded=True)
            raise
        self._model_step(started, clock, response, None)
        await stream.end()
        return response

    async def _count_cut(self, messages: list[LLMMessage], written: str) -> None:
        """A call stopped mid-reply was paid for all the same, though no usage came: what it
        sent and what it wrote before the stop count, estimated, as its usage and cost (else
        a person who stopped each reply just short of its end read it for nothing)."""
        try:
            prompt = self._tokens_sent(messages)
            completion = self.budget.counter.text(written) if written else 0
            usage = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
            cost = await self.llm.cost_of(usage)
            _add_usage(self.result, usage, cost)
            if self.spending is not None:
                await self.spending.settle(cost)
        except Exception:  # the stop goes on whatever this could not count
            logger.exception("could not count a model call cut short")

    async def _act(
        self,
        turn: list[LLMMessage],
        calls: list[ToolCall],
        parsed: list[dict[str, Any] | str],
        result: LoopResult,
        verdicts: Verdicts,
    ) -> bool:
        """Run the calls of one answer (`AnswerCalls.act`); whether calls are left waiting
        (then `result` says which, and the turn ends here)."""
        # Made for each answer: it keeps to the loop's tools and gate as they are now.
        calls_of = AnswerCalls(
            tools=self.tools, emit=self.emit, gate=self.gate, steps=self.steps, record=self._record
        )
        waiting = await calls_of.act(turn, calls, parsed, result.tools_used, verdicts)
        if waiting is None:
            return False
        external = self.gate.external if self.gate is not None else frozenset()
        handed = [call for call in waiting if call.name in external]
        if handed:
            # The calls after them that wait for a person are decided when the client's
            # results continue the turn.
            result.handed_over = handed
            return True
        result.status, result.waiting = "waiting", waiting
        return True

    def _model_step(
        self, started: float, clock: float, response: LLMResponse | None, error: str | None
    ) -> None:
        if self.steps is not None:
            ms = int((time.perf_counter() - clock) * 1000)
            model = self.llm.config.model
            self.steps.model_call(
                model=model, started=started, ms=ms, response=response, error=error
            )

    async def _record(
        self, turn: list[LLMMessage], message: LLMMessage, usage: dict[str, int] | None
    ) -> None:
        turn.append(message)
        await self.on_message(message, usage)

    async def _halted(self, turn: list[LLMMessage], result: LoopResult, text: str) -> LoopResult:
        # Every call of the last answer has its result already: the history stays valid.
        result.status = "failed"
        result.error = text
        result.error_kind = "halted"
        result.text = text
        await self._record(turn, {"role": "assistant", "content": text}, None)
        return result

    def _failed(
        self, result: LoopResult, error: LLMError, *, history_sent: bool, turn: list[LLMMessage]
    ) -> LoopResult:
        logger.warning("model call failed for good (%s): %s", error.kind, error)
        result.status = "failed"
        result.error = str(error)
        result.error_kind = error.kind
        result.text = explain(error, history_sent=history_sent, steps_sent=len(turn) > 1)
        return result


def _add_usage(result: LoopResult, usage: dict[str, int], cost: float | None) -> None:
    for key, value in usage.items():
        result.usage[key] = result.usage.get(key, 0) + value
    if cost is not None:
        result.cost = (result.cost or 0.0) + cost
