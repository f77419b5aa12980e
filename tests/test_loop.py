"""The loop with the scripted model and a real tool registry: no Django involved."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agent.budget import ContextBudget
from agent.events import Collector
from agent.loop import AgentLoop
from agent.loop_tools import CANCELLED_RESULT
from agent.tokens import TokenCounter
from agent.tools import Tool, ToolContext, build_registry
from agent.tools.registry import ToolRegistry
from tests.llm_server import ScriptedLLM
from tests.test_llm import make_llm

SYSTEM = {"role": "system", "content": "You are a test."}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


class Boom(Tool):
    name = "boom"
    description = "Always fails."
    parameters = {"type": "object", "properties": {}}

    async def execute(self, ctx: ToolContext, /, **kwargs: Any) -> str:
        raise RuntimeError("kaboom")


class Sleepy(Tool):
    name = "sleepy"
    description = "Sleeps."
    parameters = {"type": "object", "properties": {"seconds": {"type": "number"}}}

    async def execute(self, ctx: ToolContext, /, seconds: float = 10, **kwargs: Any) -> str:
        await asyncio.sleep(seconds)
        return "rested"


def registry(workspace: Path, *extra: Tool) -> ToolRegistry:
    tools = build_registry(workspace=workspace, exec_timeout=5)
    for tool in extra:
        tools.register(tool)
    return tools


def make_loop(
    llm: ScriptedLLM, workspace: Path, *extra: Tool, max_iterations: int = 10
) -> tuple[AgentLoop, Collector, list[dict[str, Any]]]:
    events = Collector()
    saved: list[dict[str, Any]] = []

    async def on_message(message: dict[str, Any], usage: dict[str, int] | None) -> None:
        saved.append(message)

    model = make_llm(llm)
    loop = AgentLoop(
        llm=model,
        tools=registry(workspace, *extra),
        emit=events,
        max_iterations=max_iterations,
        budget=ContextBudget(
            window=llm.context_window, reserve=0, counter=TokenCounter(model.config.model)
        ),
        on_message=on_message,
    )
    return loop, events, saved


async def test_multi_step_turn_with_tools(llm: ScriptedLLM, workspace: Path) -> None:
    llm.tool_call("write_file", {"path": "hello.txt", "content": "Hello World"}, text="On it.")
    llm.tool_call("read_file", {"path": "hello.txt"})
    llm.reply("The file says Hello World.")
    loop, events, saved = make_loop(llm, workspace)

    result = await loop.run(SYSTEM, [], user("create hello.txt"))

    assert result.status == "succeeded"
    assert result.text == "The file says Hello World."
    assert result.iterations == 3
    assert result.tools_used == ["write_file", "read_file"]
    assert (workspace / "hello.txt").read_text() == "Hello World"
    assert [m["role"] for m in saved] == ["assistant", "tool", "assistant", "tool", "assistant"]
    assert saved[0]["content"] == "On it."
    assert saved[0]["tool_calls"][0]["function"]["name"] == "write_file"
    assert "Hello World" in saved[3]["content"]
    assert result.usage["total_tokens"] > 0

    # The model saw the tool results: the third request carries both calls and results.
    third = llm.requests[2]["messages"]
    assert [m["role"] for m in third] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    assert third[3]["tool_call_id"] == saved[0]["tool_calls"][0]["id"]

    types = [frame["type"] for frame in events.frames()]
    assert types[:2] == ["stream_start", "stream_chunk"]
    assert types.count("tool_call") == 2 and types.count("tool_result") == 2
    assert types.index("tool_call") < types.index("tool_result")
    assert types[-1] == "stream_end"
    results = [e.to_dict() for e in events.of_type("tool_result")]
    assert results[0]["name"] == "write_file" and "duration_ms" in results[0]


async def test_streamed_chunks_equal_saved_text(llm: ScriptedLLM, workspace: Path) -> None:
    text = "A longer answer, streamed in many small pieces, with *markdown*."
    llm.reply(text, chunks=12)
    loop, events, saved = make_loop(llm, workspace)
    await loop.run(SYSTEM, [], user("talk"))
    chunks = [e.to_dict()["content"] for e in events.of_type("stream_chunk")]
    assert len(chunks) >= 10
    assert "".join(chunks) == saved[-1]["content"] == text


async def test_iteration_cap_stops_the_turn(llm: ScriptedLLM, workspace: Path) -> None:
    for _ in range(5):
        llm.tool_call("list_dir", {"path": "."})
    loop, _, saved = make_loop(llm, workspace, max_iterations=3)

    result = await loop.run(SYSTEM, [], user("loop forever"))

    assert result.status == "failed"
    assert result.error_kind == "max_iterations"
    assert result.iterations == 3
    assert "AGENT_MAX_ITERATIONS" in result.text
    assert len(llm.requests) == 3
    assert saved[-1] == {"role": "assistant", "content": result.text}


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (("no_such_tool", {"x": 1}), "Error: unknown tool 'no_such_tool'"),
        (("read_file", '{"path": "a.txt"'), "Error: arguments for 'read_file' are not valid JSON"),
        (("read_file", {"offset": 3}), "Error: invalid arguments for 'read_file'"),
        (("boom", {}), "Error: boom failed unexpectedly (reference "),
    ],
    ids=["unknown-tool", "invalid-json", "schema-violation", "tool-raises"],
)
async def test_tool_failures_reach_the_model_and_the_loop_goes_on(
    llm: ScriptedLLM, workspace: Path, call: tuple[str, Any], expected: str
) -> None:
    llm.tool_call(*call)
    llm.reply("I see the error.")
    loop, _, saved = make_loop(llm, workspace, Boom())

    result = await loop.run(SYSTEM, [], user("try it"))

    assert result.status == "succeeded"
    assert result.text == "I see the error."
    tool_message = saved[1]
    assert tool_message["role"] == "tool"
    assert tool_message["content"].startswith(expected), tool_message["content"]
    sent_back = llm.requests[1]["messages"]
    assert sent_back[-1]["content"] == tool_message["content"]
    replayed = sent_back[-2]["tool_calls"][0]["function"]["arguments"]
    if isinstance(call[1], str):
        # Arguments that don't parse go back as `{}`: providers reject the raw text.
        assert replayed == "{}"
    else:
        assert json.loads(replayed) == call[1]


async def test_model_failure_ends_the_turn_with_a_plain_reply(
    llm: ScriptedLLM, workspace: Path
) -> None:
    llm.fault(401, body={"error": {"message": "invalid api key"}})
    loop, _, saved = make_loop(llm, workspace)
    result = await loop.run(SYSTEM, [], user("hello"))
    assert result.status == "failed"
    assert result.error_kind == "auth"
    assert "did not accept the site's credentials" in result.text
    assert "invalid api key" not in result.text
    assert saved == []


async def test_context_overflow_drops_old_history_and_retries_once(
    llm: ScriptedLLM, workspace: Path
) -> None:
    history = []
    for index in range(6):
        history += [
            user(f"old question {index}"),
            {"role": "assistant", "content": f"answer {index}"},
        ]
    llm.fault(400, body={"error": {"message": "maximum context length exceeded"}})
    llm.reply("fits now")
    loop, _, _ = make_loop(llm, workspace)

    result = await loop.run(SYSTEM, history, user("new"))

    assert result.text == "fits now"
    assert result.iterations == 1
    retried = llm.requests[1]["messages"]
    assert len(retried) < len(llm.requests[0]["messages"])
    assert retried[1]["role"] == "user"
    assert retried[-1]["content"] == "new"


async def test_cancelled_turn_leaves_a_valid_history(llm: ScriptedLLM, workspace: Path) -> None:
    llm.tool_calls([("sleepy", {"seconds": 30}), ("list_dir", {})])
    loop, events, saved = make_loop(llm, workspace, Sleepy())

    task = asyncio.create_task(loop.run(SYSTEM, [], user("sleep")))
    while not events.of_type("tool_call"):
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert [m["role"] for m in saved] == ["assistant", "tool", "tool"]
    assert {m["tool_call_id"] for m in saved[1:]} == {c["id"] for c in saved[0]["tool_calls"]}
    assert all(m["content"] == CANCELLED_RESULT for m in saved[1:])
    # No tool ran after the stop: list_dir never started.
    assert [e.to_dict()["name"] for e in events.of_type("tool_call")] == ["sleepy"]
