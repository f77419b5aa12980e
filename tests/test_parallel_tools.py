"""The calls of one model answer that are safe side by side run at once; any other runs
alone, in order; answers reach the model in the calls' order whatever order they end in."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import mcp.types
import pytest

from agent.loop_tools import CANCELLED_RESULT
from agent.tools import Tool, ToolContext
from agent.tools.mcp.tool import make_tools
from tests.conftest import ROOT
from tests.llm_server import ScriptedLLM
from tests.test_loop import SYSTEM, make_loop, user


class Timeline:
    def __init__(self) -> None:
        self.spans: dict[str, tuple[float, float]] = {}

    def overlap(self, a: str, b: str) -> bool:
        (a0, a1), (b0, b1) = self.spans[a], self.spans[b]
        return a0 < b1 and b0 < a1

    def before(self, a: str, b: str) -> bool:
        return self.spans[a][1] <= self.spans[b][0]


class Timed(Tool):
    """Sleeps `seconds`, noting when it ran under its `label`."""

    parameters = {
        "type": "object",
        "properties": {"label": {"type": "string"}, "seconds": {"type": "number"}},
    }

    def __init__(self, name: str, timeline: Timeline, *, parallel_safe: bool) -> None:
        self.name = name
        self.description = name
        self.timeline = timeline
        self.parallel_safe = parallel_safe

    async def execute(self, ctx: ToolContext, /, **kwargs: Any) -> str:
        began = time.monotonic()
        await asyncio.sleep(kwargs.get("seconds", 0.3))
        self.timeline.spans[kwargs["label"]] = (began, time.monotonic())
        return f"{kwargs['label']} done"


def tools(timeline: Timeline) -> tuple[Tool, Tool]:
    return (
        Timed("look", timeline, parallel_safe=True),
        Timed("change", timeline, parallel_safe=False),
    )


async def test_safe_calls_run_at_once_and_others_alone_in_order(
    llm: ScriptedLLM, workspace: Path
) -> None:
    timeline = Timeline()
    llm.tool_calls(
        [
            ("look", {"label": "a", "seconds": 0.4}),
            ("look", {"label": "b", "seconds": 0.1}),
            ("change", {"label": "c", "seconds": 0.1}),
            ("change", {"label": "d", "seconds": 0.1}),
            ("look", {"label": "e", "seconds": 0.1}),
        ]
    )
    llm.reply("All done.")
    loop, events, saved = make_loop(llm, workspace, *tools(timeline))

    result = await loop.run(SYSTEM, [], user("go"))

    assert result.status == "succeeded"
    assert timeline.overlap("a", "b")
    assert timeline.before("a", "c") and timeline.before("b", "c")
    assert timeline.before("c", "d") and timeline.before("d", "e")
    # The history answers the calls in their order, though b ended before a.
    ids = [call["id"] for call in saved[0]["tool_calls"]]
    answers = [(m["tool_call_id"], m["content"]) for m in saved[1:6]]
    assert answers == list(
        zip(ids, ["a done", "b done", "c done", "d done", "e done"], strict=True)
    )
    assert llm.requests[1]["messages"][-5:] == saved[1:6]
    # Every card opens before it closes, with the call's own id.
    frames = events.frames()
    opened = [f["id"] for f in frames if f["type"] == "tool_call"]
    closed = [f["id"] for f in frames if f["type"] == "tool_result"]
    assert opened == ids and sorted(closed) == sorted(ids)
    assert closed[:2] == [ids[1], ids[0]]  # b's result is shown as soon as it is there
    assert result.tools_used == ["look", "look", "change", "change", "look"]


class Failing(Timed):
    """Safe side by side, and fails once it has slept."""

    async def execute(self, ctx: ToolContext, /, **kwargs: Any) -> str:
        await super().execute(ctx, **kwargs)
        raise RuntimeError("the disk is on fire")


async def test_one_failing_call_does_not_cancel_the_others(
    llm: ScriptedLLM, workspace: Path
) -> None:
    timeline = Timeline()
    failing = Failing("flaky", timeline, parallel_safe=True)
    llm.tool_calls(
        [
            ("look", {"label": "a", "seconds": 0.3}),
            ("flaky", {"label": "f", "seconds": 0.05}),
            ("look", {"label": "b", "seconds": 0.3}),
        ]
    )
    llm.reply("Two of three.")
    loop, _, saved = make_loop(llm, workspace, *tools(timeline), failing)

    result = await loop.run(SYSTEM, [], user("go"))

    assert result.status == "succeeded"
    assert timeline.overlap("a", "f") and timeline.overlap("a", "b")
    answers = [m["content"] for m in saved[1:4]]
    assert answers[0] == "a done" and answers[2] == "b done"
    assert answers[1].startswith("Error: flaky failed unexpectedly (reference ")


async def test_a_call_whose_arguments_do_not_parse_runs_alone(
    llm: ScriptedLLM, workspace: Path
) -> None:
    timeline = Timeline()
    llm.tool_calls([("look", {"label": "a"}), ("look", "{not json"), ("look", {"label": "b"})])
    llm.reply("ok")
    loop, _, saved = make_loop(llm, workspace, *tools(timeline))

    await loop.run(SYSTEM, [], user("go"))

    assert saved[2]["content"].startswith("Error: arguments for 'look' are not valid JSON")
    assert timeline.before("a", "b")


async def test_a_stop_while_calls_run_at_once_answers_every_call(
    llm: ScriptedLLM, workspace: Path
) -> None:
    timeline = Timeline()
    llm.tool_calls([("look", {"label": "quick", "seconds": 0.05}), ("look", {"label": "slow"})])
    loop, events, saved = make_loop(llm, workspace, *tools(timeline))
    turn = asyncio.create_task(loop.run(SYSTEM, [], user("go")))
    while "quick" not in timeline.spans:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    turn.cancel()
    with pytest.raises(asyncio.CancelledError):
        await turn

    ids = [call["id"] for call in saved[0]["tool_calls"]]
    assert [(m["tool_call_id"], m["content"]) for m in saved[1:]] == [
        (ids[0], "quick done"),
        (ids[1], CANCELLED_RESULT),
    ]
    closed = {f["id"]: f["result"] for f in events.frames() if f["type"] == "tool_result"}
    assert closed == {ids[0]: "quick done", ids[1]: CANCELLED_RESULT}


def test_mcp_tools_run_beside_others_only_on_the_servers_word() -> None:
    listing = [
        mcp.types.Tool(
            name="search",
            input_schema={"type": "object"},
            annotations=mcp.types.ToolAnnotations(read_only_hint=True),
        ),
        mcp.types.Tool(
            name="delete",
            input_schema={"type": "object"},
            annotations=mcp.types.ToolAnnotations(read_only_hint=False),
        ),
        mcp.types.Tool(name="unsaid", input_schema={"type": "object"}),
    ]

    class Config:
        name = "docs"

    made = make_tools(object(), Config(), listing)  # type: ignore[arg-type]

    assert {tool.name: tool.parallel_safe for tool in made} == {
        "mcp_docs_search": True,
        "mcp_docs_delete": False,
        "mcp_docs_unsaid": False,
    }


class SlowPages(ThreadingHTTPServer):
    """Answers every GET after `delay` seconds; notes how many were under way at once."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.in_flight = 0
        self.most_at_once = 0
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with server.lock:
                    server.in_flight += 1
                    server.most_at_once = max(server.most_at_once, server.in_flight)
                time.sleep(server.delay)
                with server.lock:
                    server.in_flight -= 1
                body = f"<html><body><p>page {self.path}</p></body></html>".encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        super().__init__(("127.0.0.1", 0), Handler)


@pytest.mark.django_db(transaction=True)
def test_the_command_line_fetches_pages_side_by_side(
    llm: ScriptedLLM, site_env: dict[str, str]
) -> None:
    pages = SlowPages(delay=0.6)
    threading.Thread(target=pages.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{pages.server_address[1]}"
    llm.tool_calls([("web_fetch", {"url": f"{base}/{n}"}) for n in range(3)])
    llm.reply("Read all three.")
    try:
        done = subprocess.run(
            [sys.executable, "manage.py", "agent", "-m", "read the three pages"],
            cwd=ROOT,
            env={**site_env, "AGENT_WEB_ALLOW_PRIVATE": "true"},
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        pages.shutdown()

    assert done.returncode == 0, done.stderr
    assert done.stdout == "Read all three.\n"
    assert pages.most_at_once == 3
    answers = [m for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert [f"page /{n}" in answer["content"] for n, answer in enumerate(answers)] == [True] * 3
