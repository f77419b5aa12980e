"""Tools' blocking calls run in threads counted against the turn's owner, never in the event
loop's shared pool: a call that never returns holds one of its owner's few places and
nobody else's, a call past those waits a bounded time and is refused plainly, and a call
the registry's time limit stops returns at once while its thread lives on."""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from agent.tools import Tool, ToolContext, ToolError, ToolRegistry, build_registry
from agent.tools.blocking import OwnerThreads, run_blocking

PROMPT = 10.0


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    """What the stuck calls wait for; opened at the end so that no thread outlives the test."""
    opened = threading.Event()
    yield opened
    opened.set()


def stuck(gate: threading.Event) -> str:
    gate.wait(60)
    return "released"


async def until(condition: Any, timeout: float = PROMPT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition never came true"
        await asyncio.sleep(0.01)


async def test_an_owners_stuck_calls_hold_only_that_owners_places(gate: threading.Event) -> None:
    threads = OwnerThreads(per_owner=2, wait=0.3)
    held = [asyncio.create_task(threads.run("ada", stuck, gate)) for _ in range(2)]
    await until(lambda: threads.running("ada") == 2)

    # Bob's calls run at once, as many as he has places for, while ada's are stuck.
    async with asyncio.timeout(PROMPT):
        assert await asyncio.gather(*(threads.run("bob", str.upper, "b") for _ in range(5))) == (
            ["B"] * 5
        )
    # Ada's next call waits its time for a place, and is refused in plain words.
    started = time.monotonic()
    with pytest.raises(ToolError, match="2 earlier tool calls of yours are still running"):
        await threads.run("ada", str.upper, "a")
    assert 0.3 <= time.monotonic() - started < PROMPT

    gate.set()
    assert await asyncio.gather(*held) == ["released", "released"]
    await until(lambda: threads.running("ada") == 0)
    assert await threads.run("ada", str.upper, "a") == "A"


async def test_a_call_past_the_owners_places_waits_for_one_to_free(gate: threading.Event) -> None:
    threads = OwnerThreads(per_owner=1, wait=PROMPT)
    first = asyncio.create_task(threads.run("ada", stuck, gate))
    await until(lambda: threads.running("ada") == 1)
    second = asyncio.create_task(threads.run("ada", str.upper, "a"))
    await asyncio.sleep(0.2)
    assert not second.done()
    gate.set()
    async with asyncio.timeout(PROMPT):
        assert await second == "A"
        assert await first == "released"


async def test_a_cancelled_call_returns_at_once_and_its_thread_keeps_its_place(
    gate: threading.Event,
) -> None:
    threads = OwnerThreads(per_owner=3, wait=0.1)
    call = asyncio.create_task(threads.run("ada", stuck, gate))
    await until(lambda: threads.running("ada") == 1)
    started = time.monotonic()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert time.monotonic() - started < 1
    assert threads.running("ada") == 1  # the thread is still in its call
    gate.set()
    await until(lambda: threads.running("ada") == 0)


async def test_an_idle_thread_is_used_again_and_a_stuck_one_is_passed_by(
    gate: threading.Event,
) -> None:
    threads = OwnerThreads()
    first = await threads.run("ada", threading.get_ident)
    assert await threads.run("bob", threading.get_ident) == first
    held = asyncio.create_task(threads.run("ada", stuck, gate))  # takes the idle thread
    await until(lambda: threads.running("ada") == 1)
    assert await threads.run("bob", threading.get_ident) != first
    gate.set()
    assert await held == "released"


async def test_results_errors_and_context_reach_the_caller() -> None:
    threads = OwnerThreads()
    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker")
    marker.set("the turn's")
    assert await threads.run(None, marker.get) == "the turn's"
    assert await threads.run(None, int, "12") == 12
    with pytest.raises(ValueError, match="invalid literal"):
        await threads.run(None, int, "twelve")
    assert threads.running(None) == 0


class StuckTool(Tool):
    name = "stuck"
    description = "Waits for a gate."
    time_limit = 0.3

    def __init__(self, gate: threading.Event) -> None:
        self.gate = gate

    async def execute(self, ctx: ToolContext, /, **kwargs: Any) -> str:
        return await run_blocking(ctx, stuck, self.gate)


async def test_the_registrys_time_limit_stops_a_stuck_call_at_once(gate: threading.Event) -> None:
    registry = ToolRegistry()
    registry.register(StuckTool(gate))
    ctx = dataclasses.replace(ToolContext.detached("web"), owner_id=41)
    started = time.monotonic()
    result = await registry.execute("stuck", {}, ctx)
    assert (
        result == "Error: stuck took longer than 0.3 seconds and was stopped; try a smaller step."
    )
    assert time.monotonic() - started < 3
    from agent.tools.blocking import threads

    assert threads.running(41) == 1
    gate.set()
    await until(lambda: threads.running(41) == 0)


@pytest.fixture
def tools(ws: Path) -> ToolRegistry:
    return build_registry(workspace=ws, exec_timeout=1)


async def test_file_tools_need_nothing_of_the_event_loops_default_pool(
    tools: ToolRegistry, ws: Path, gate: threading.Event
) -> None:
    """Every thread of the loop's default executor is held by something that never returns:
    the file tools still answer, since they never queue there."""
    loop = asyncio.get_running_loop()
    pool = ThreadPoolExecutor(max_workers=1)
    loop.set_default_executor(pool)
    loop.run_in_executor(None, stuck, gate)
    (ws / "a.txt").write_text("one\n")
    calls = [
        ("read_file", {"path": "a.txt"}),
        ("write_file", {"path": "b.txt", "content": "two\n"}),
        ("append_file", {"path": "b.txt", "content": "three\n"}),
        ("edit_file", {"path": "b.txt", "old_text": "two", "new_text": "2"}),
        ("list_dir", {"recursive": True}),
        ("glob", {"pattern": "*.txt"}),
    ]
    try:
        async with asyncio.timeout(PROMPT):
            results = [await tools.execute(name, args) for name, args in calls]
    finally:
        gate.set()
    assert results == [
        "     1\tone",
        "Wrote 4 bytes to b.txt",
        "Appended 6 bytes to b.txt",
        "Replaced 1 occurrence in b.txt",
        "a.txt\nb.txt",
        "a.txt\nb.txt",
    ]


async def test_hook_functions_need_nothing_of_the_event_loops_default_pool(
    gate: threading.Event,
) -> None:
    """An operator's plain hook function runs in threads of its own too: with the loop's
    default executor held for good, a guard still answers."""
    from agent.tools.hook_config import FunctionHook, HookSet
    from agent.tools.hooks import TurnHooks

    loop = asyncio.get_running_loop()
    loop.set_default_executor(ThreadPoolExecutor(max_workers=1))
    loop.run_in_executor(None, stuck, gate)
    seen: list[str] = []
    guard = FunctionHook("tests.guard", lambda event: seen.append(event["tool"]))
    hooks = TurnHooks(
        HookSet(functions=(guard,)), session="web:a", user="ada", run_id="r", channel="web"
    )
    try:
        async with asyncio.timeout(PROMPT):
            passed = await hooks.before_tool("read_file", {"path": "a.txt"})
    finally:
        gate.set()
    assert passed == {"path": "a.txt"} and seen == ["read_file"]
