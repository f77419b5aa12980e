"""ToolRegistry: lookup, definitions, argument validation, and never raising into the loop."""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path
from typing import Any

import pytest

from agent.tools import Tool, ToolContext, ToolError, ToolRegistry, build_registry


class EchoTool(Tool):
    name = "echo"
    description = "Echo the text back."
    parameters = {
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "times": {"type": "integer", "minimum": 1},
            "opts": {
                "type": "object",
                "properties": {"upper": {"type": "boolean"}},
                "additionalProperties": False,
            },
        },
        "required": ["text"],
        "additionalProperties": False,
    }

    async def execute(self, ctx: ToolContext, /, **kwargs: Any) -> str:
        text = kwargs["text"] * kwargs.get("times", 1)
        if kwargs.get("opts", {}).get("upper"):
            text = text.upper()
        return text


class NoArgsTool(Tool):
    name = "ping"
    description = "Say pong."

    async def execute(self, ctx: ToolContext, /, **kwargs: Any) -> str:
        return "pong"


class BoomTool(Tool):
    name = "boom"
    description = "Always fails."

    async def execute(self, ctx: ToolContext, /, **kwargs: Any) -> str:
        raise ValueError("bad things")


class PoliteFailureTool(Tool):
    name = "polite"
    description = "Fails with a ToolError."

    async def execute(self, ctx: ToolContext, /, **kwargs: Any) -> str:
        raise ToolError("the thing is missing")


class CancelTool(Tool):
    name = "cancel"
    description = "Raises CancelledError."

    async def execute(self, ctx: ToolContext, /, **kwargs: Any) -> str:
        raise asyncio.CancelledError


class SlowTool(Tool):
    name = "slow"
    description = "Sleeps."

    def __init__(self) -> None:
        self.started = asyncio.Event()

    async def execute(self, ctx: ToolContext, /, **kwargs: Any) -> str:
        self.started.set()
        await asyncio.sleep(30)
        return "done"


class NumberTool(Tool):
    name = "number"
    description = "Returns a non-string."

    async def execute(self, ctx: ToolContext, /, **kwargs: Any) -> str:
        return 42  # type: ignore[return-value]


@pytest.fixture
def registry() -> ToolRegistry:
    reg = ToolRegistry()
    for tool in (EchoTool(), NoArgsTool(), BoomTool(), PoliteFailureTool()):
        reg.register(tool)
    return reg


def test_lookup(registry: ToolRegistry) -> None:
    assert registry.has("echo")
    assert "echo" in registry
    assert isinstance(registry.get("echo"), EchoTool)
    assert registry.get("nope") is None
    assert not registry.has("nope")
    assert registry.names() == ["echo", "ping", "boom", "polite"]
    assert len(registry) == 4
    registry.unregister("boom")
    assert registry.names() == ["echo", "ping", "polite"]
    registry.unregister("boom")  # unknown names are ignored


def test_register_requires_a_name() -> None:
    class Nameless(NoArgsTool):
        name = ""

    with pytest.raises(ValueError, match="no name"):
        ToolRegistry().register(Nameless())


def test_definition_shape() -> None:
    assert EchoTool().definition() == {
        "type": "function",
        "function": {
            "name": "echo",
            "description": "Echo the text back.",
            "parameters": EchoTool.parameters,
        },
    }


def test_definitions_are_cached_and_invalidated(registry: ToolRegistry) -> None:
    calls = 0

    class Counting(NoArgsTool):
        name = "counting"

        def definition(self) -> dict[str, Any]:
            nonlocal calls
            calls += 1
            return super().definition()

    registry.register(Counting())
    first = registry.definitions()
    second = registry.definitions()
    assert first == second
    assert calls == 1
    assert [d["function"]["name"] for d in first] == [
        "echo",
        "ping",
        "boom",
        "polite",
        "counting",
    ]

    registry.unregister("boom")
    names = [d["function"]["name"] for d in registry.definitions()]
    assert names == ["echo", "ping", "polite", "counting"]
    assert calls == 2

    registry.register(EchoTool())  # replacing a tool invalidates too
    registry.definitions()
    assert calls == 3


async def test_execute_with_dict_and_json_string(registry: ToolRegistry) -> None:
    assert await registry.execute("echo", {"text": "hi", "times": 2}) == "hihi"
    assert await registry.execute("echo", '{"text": "hi", "opts": {"upper": true}}') == "HI"


async def test_execute_with_empty_arguments(registry: ToolRegistry) -> None:
    assert await registry.execute("ping", "") == "pong"
    assert await registry.execute("ping", {}) == "pong"
    assert await registry.execute("ping", None) == "pong"


async def test_unknown_tool_lists_the_available_ones(registry: ToolRegistry) -> None:
    result = await registry.execute("nope", {})
    assert result == "Error: unknown tool 'nope'. Available tools: boom, echo, ping, polite"


@pytest.mark.parametrize("arguments", ['{"text": ', "not json", "[1, 2]", '"text"', "3"])
async def test_invalid_json_arguments(registry: ToolRegistry, arguments: str) -> None:
    result = await registry.execute("echo", arguments)
    assert result.startswith("Error: arguments for 'echo' are not valid JSON: ")


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({}, "Error: invalid arguments for 'echo': <root>: 'text' is a required property"),
        ({"text": 5}, "Error: invalid arguments for 'echo': text: 5 is not of type 'string'"),
        (
            {"text": "x", "times": 0},
            "Error: invalid arguments for 'echo': times: 0 is less than the minimum of 1",
        ),
        (
            {"text": "x", "opts": {"upper": "yes"}},
            "Error: invalid arguments for 'echo': opts/upper",
        ),
        ({"text": "x", "extra": 1}, "Error: invalid arguments for 'echo': <root>: Additional"),
    ],
)
async def test_schema_violations(registry: ToolRegistry, arguments: Any, expected: str) -> None:
    result = await registry.execute("echo", arguments)
    assert result.startswith(expected), result


async def test_validators_are_cached(registry: ToolRegistry) -> None:
    await registry.execute("echo", {"text": "a"})
    validator = registry._validators["echo"]
    await registry.execute("echo", {"text": "b"})
    assert registry._validators["echo"] is validator


async def test_a_raising_tool_becomes_error_text_with_a_reference_to_the_log(
    registry: ToolRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="agent.tools.registry"):
        result = await registry.execute("boom", {})
    match = re.fullmatch(
        r"Error: boom failed unexpectedly \(reference (\w+)\); try another way\.", result
    )
    assert match, result
    assert "bad things" not in result  # the exception's text stays in the log
    [record] = [r for r in caplog.records if r.exc_info]
    assert match[1] in record.getMessage()
    assert "bad things" in caplog.text


async def test_a_system_error_tells_the_reason_but_not_the_path(tmp_path: Path) -> None:
    class Opener(Tool):
        name = "opener"

        async def execute(self, ctx: ToolContext, /, **kwargs: Any) -> str:
            return (tmp_path / "server-only" / "missing").read_text()

    registry = ToolRegistry()
    registry.register(Opener())
    result = await registry.execute("opener", {})
    assert result == "Error: opener failed: No such file or directory"


async def test_a_tool_error_becomes_plain_error_text(registry: ToolRegistry) -> None:
    assert await registry.execute("polite", {}) == "Error: the thing is missing"


async def test_non_string_results_are_converted() -> None:
    registry = ToolRegistry()
    registry.register(NumberTool())
    assert await registry.execute("number", {}) == "42"


async def test_invalid_schema_is_reported_not_raised() -> None:
    class BadSchema(NoArgsTool):
        name = "bad"
        parameters = {"type": "object", "properties": {"x": {"type": "nonsense"}}}

    registry = ToolRegistry()
    registry.register(BadSchema())
    assert (await registry.execute("bad", {})).startswith("Error: tool 'bad' has an invalid")


async def test_cancelled_error_raised_by_a_tool_propagates() -> None:
    registry = ToolRegistry()
    registry.register(CancelTool())
    with pytest.raises(asyncio.CancelledError):
        await registry.execute("cancel", {})


async def test_cancelling_a_running_tool_propagates() -> None:
    registry = ToolRegistry()
    slow = SlowTool()
    registry.register(slow)
    task = asyncio.create_task(registry.execute("slow", {}))
    await asyncio.wait_for(slow.started.wait(), 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()


def test_build_registry_has_the_contract_tools(tmp_path: Path) -> None:
    registry = build_registry(workspace=tmp_path / "ws", exec_timeout=5)
    assert registry.names() == [
        "read_file",
        "write_file",
        "edit_file",
        "append_file",
        "list_dir",
        "glob",
        "exec",
        "web_search",
        "web_fetch",
        "message",
        "read_skill",
        "spawn",
        "subagent",
        "cron",
    ]
    assert (tmp_path / "ws").is_dir()
    params = {d["function"]["name"]: d["function"]["parameters"] for d in registry.definitions()}
    assert set(params["read_file"]["properties"]) == {"path", "offset", "limit"}
    assert set(params["write_file"]["properties"]) == {"path", "content"}
    assert set(params["spawn"]["properties"]) == {"task", "label"}
    assert set(params["cron"]["properties"]) == {
        "action",
        "message",
        "every_seconds",
        "cron_expr",
        "tz",
        "at",
        "job_id",
    }
    assert set(params["edit_file"]["properties"]) == {"path", "old_text", "new_text", "replace_all"}
    assert set(params["append_file"]["properties"]) == {"path", "content"}
    assert set(params["list_dir"]["properties"]) == {"path", "recursive"}
    assert set(params["glob"]["properties"]) == {"pattern", "path"}
    assert set(params["exec"]["properties"]) == {"command", "working_dir", "timeout"}
    assert set(params["web_search"]["properties"]) == {"query", "count"}
    assert set(params["web_fetch"]["properties"]) == {"url", "extract_mode", "max_chars"}
    assert set(params["message"]["properties"]) == {"content", "channel", "chat_id"}
    for definition in registry.definitions():
        assert definition["type"] == "function"
        assert definition["function"]["description"]
        assert definition["function"]["parameters"]["type"] == "object"
