"""The running of one answer's tool calls: up to the first that waits for a person, side by
side where that is safe, each announced and answered on the clients and recorded in the
history in the calls' order, even when the turn is stopped midway. Like the loop it serves,
it knows nothing about Django, channels or HTTP."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from agent.budget import LLMMessage
from agent.events import Emit, ToolCallEvent, ToolResult
from agent.gate import Gate, Verdicts, WaitingCall
from agent.llm.client import ToolCall
from agent.loop_messages import batches, tool_message

CANCELLED_RESULT = "Error: the turn was stopped before this tool ran to completion."

# Adds a message to the turn and hands it on: the loop's, so that both keep one history.
Record = Callable[[list[LLMMessage], LLMMessage, dict[str, int] | None], Awaitable[None]]


class Tools(Protocol):
    """What the loop needs of a tool set (a turn's `agent.tools.TurnTools`)."""

    def definitions(self) -> list[dict[str, Any]]: ...

    def parallel_safe(self, name: str) -> bool: ...

    async def execute(self, name: str, arguments: dict[str, Any] | str | None) -> str: ...


class ToolSteps(Protocol):
    """Where each tool call is reported once it has ended, stopped or failed (the tool half
    of `agent.loop.Steps`)."""

    # `output` is None for a call stopped before it answered.
    def tool_call(self, *, call: ToolCall, started: float, ms: int, output: str | None) -> None: ...


class AnswerCalls:
    """Runs the tool calls of one model answer for a loop."""

    def __init__(
        self,
        *,
        tools: Tools,
        emit: Emit,
        gate: Gate | None,
        steps: ToolSteps | None,
        record: Record,
    ) -> None:
        self.tools = tools
        self.emit = emit
        self.gate = gate
        self.steps = steps
        self.record = record

    async def act(
        self,
        turn: list[LLMMessage],
        calls: list[ToolCall],
        parsed: list[dict[str, Any] | str],
        used: list[str],
        verdicts: Verdicts,
    ) -> list[WaitingCall] | None:
        """Run the calls of one answer up to the first that waits for a person, each that
        was answered as its verdict says; the calls left waiting, if any (then the turn ends
        here). The names of the tools that ran go into `used`."""
        stop, verdicts = len(calls), dict(verdicts)
        if self.gate is not None:
            stop, verdicts = self.gate.split([(c.id, c.name) for c in calls], verdicts)
        await self._run_tools(turn, calls[:stop], parsed[:stop], used, verdicts)
        if stop == len(calls):
            return None
        return [
            WaitingCall(call.id, call.name, arguments, position)
            for position, (call, arguments) in enumerate(zip(calls, parsed, strict=True))
            if position >= stop and call.id not in verdicts and self._gated(call.name)
        ]

    def _gated(self, name: str) -> bool:
        return self.gate is not None and self.gate.waits(name)

    def _client_ran(self, call: ToolCall, verdicts: Verdicts) -> bool:
        """Whether `call` is of the client's own tools, answered by the client."""
        external = self.gate is not None and call.name in self.gate.external
        return external and verdicts.get(call.id) is not None

    def _parallel_safe(self, name: str) -> bool:
        # A call that waits for a person runs alone, once it may.
        return self.tools.parallel_safe(name) and not self._gated(name)

    async def _run_tools(
        self,
        turn: list[LLMMessage],
        calls: list[ToolCall],
        parsed: list[dict[str, Any] | str],
        used: list[str],
        verdicts: Verdicts,
    ) -> None:
        """Run the calls of one answer: each run of calls that are safe side by side at once,
        any other alone, in order; their answers go into the history in the calls' order.
        A call with a verdict text does not run: that text is its answer."""
        recorded = 0
        answers: dict[str, str] = {}
        # Calls whose card the clients show open: announced, no result sent yet.
        running: dict[str, ToolCall] = {}
        try:
            for batch in batches(calls, parsed, self._parallel_safe):
                for call, arguments in batch:
                    if self._client_ran(call, verdicts):
                        continue  # the client ran it, and showed it, itself
                    await self.emit(
                        ToolCallEvent(
                            id=call.id,
                            name=call.name,
                            arguments=arguments if isinstance(arguments, dict) else call.arguments,
                        )
                    )
                    running[call.id] = call
                    if verdicts.get(call.id) is None:
                        used.append(call.name)
                runs = [
                    self._run_tool(call, arguments, answers, running, verdicts.get(call.id))
                    for call, arguments in batch
                ]
                if len(runs) == 1:
                    await runs[0]
                else:
                    await asyncio.gather(*runs)
                for call, _ in batch:
                    # Counted before the write: a stop during it must not answer this call
                    # twice (the write finishes in its thread all the same).
                    recorded += 1
                    await self.record(turn, tool_message(call, answers[call.id]), None)
        except asyncio.CancelledError:
            # Every call needs an answer or the saved history is invalid for the provider;
            # the ones that were running also close their cards on the clients.
            for call in running.values():
                await self.emit(ToolResult(id=call.id, name=call.name, result=CANCELLED_RESULT))
            for call in calls[recorded:]:
                answer = answers.get(call.id, CANCELLED_RESULT)
                await self.record(turn, tool_message(call, answer), None)
            raise

    async def _run_tool(
        self,
        call: ToolCall,
        arguments: dict[str, Any] | str,
        answers: dict[str, str],
        running: dict[str, ToolCall],
        verdict: str | None = None,
    ) -> None:
        started, wall = time.monotonic(), time.time()
        try:
            if verdict is None:
                output = await self.tools.execute(call.name, arguments)
            else:
                output = verdict  # answered for it: it does not run
        except BaseException:
            self._tool_step(call, wall, int((time.monotonic() - started) * 1000), None)
            raise
        elapsed = int((time.monotonic() - started) * 1000)
        self._tool_step(call, wall, elapsed, output)
        answers[call.id] = output
        if running.pop(call.id, None) is not None:
            await self.emit(
                ToolResult(id=call.id, name=call.name, result=output, duration_ms=elapsed)
            )

    def _tool_step(self, call: ToolCall, started: float, ms: int, output: str | None) -> None:
        if self.steps is not None:
            self.steps.tool_call(call=call, started=started, ms=ms, output=output)
