"""The MCP client against real servers: the demo server of tests/mcp_servers over stdio and
streamable HTTP, and a reference server from npm run by Node.js. Nothing of the SDK is mocked."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.tools import ToolRegistry
from agent.tools.base import Tool, ToolContext
from agent.tools.mcp import McpHub, McpServerConfig, McpTool
from agent.tools.mcp.tool import make_tools, result_text

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / ".cache/npm/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
DEMO_TOOLS = ["echo", "add", "fail", "sleep", "pid", "env"]


def stdio_demo(name: str = "demo", *, log: Path | None = None, **overrides: Any) -> McpServerConfig:
    args: tuple[str, ...] = ("-m", "tests.mcp_servers.demo")
    if log is not None:
        args += ("--log", str(log))
    fields: dict[str, Any] = {
        "command": sys.executable,
        "args": args,
        "cwd": str(ROOT),
        "tool_timeout": 1.0,
        **overrides,
    }
    return McpServerConfig(name, "stdio", **fields)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def by_name(tools: list[Tool]) -> dict[str, Tool]:
    return {tool.name: tool for tool in tools}


def sleep_events(log: Path, seconds: float) -> list[str]:
    """What the demo server's `sleep` call of ``seconds`` recorded, in order."""
    if not log.exists():
        return []
    events, mine = [], False
    for line in log.read_text().splitlines():
        event = line.split(" ", 1)[1]
        if event.startswith("started"):
            mine = event == f"started {seconds}"
            if mine:
                events.append("started")
        elif mine:
            events.append(event)
    return events


async def wait_until(check: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.02)


@contextlib.contextmanager
def running_http_demo(log: Path) -> Iterator[str]:
    """The demo server on streamable HTTP on 127.0.0.1, while the block runs: its URL."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.mcp_servers.demo", "--http", str(port), "--log", str(log)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert proc.poll() is None, "the demo HTTP server exited"
                assert time.monotonic() < deadline, "the demo HTTP server did not start"
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def http_demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The demo server on streamable HTTP: its URL and its `sleep` log."""
    log = tmp_path_factory.mktemp("mcp-http") / "sleep.log"
    with running_http_demo(log) as url:
        yield url, log


@pytest.fixture(scope="module")
def stdio_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp-stdio") / "sleep.log"


@pytest.fixture(scope="module")
def shared_hub(http_demo: tuple[str, Path], stdio_log: Path) -> Iterator[McpHub]:
    """One hub for the module's tests that leave their servers as they found them. Each
    test runs on an event loop of its own, so this also uses the hub from many loops."""
    hub = McpHub()
    hub.configure(
        [
            stdio_demo("demo", log=stdio_log),
            McpServerConfig(
                "web",
                "http",
                url=http_demo[0],
                headers=(("Authorization", "Bearer header-secret-value"),),
                tool_timeout=1.0,
                trusted=True,  # on loopback: the network guard would refuse it
            ),
        ]
    )
    yield hub
    hub.shutdown()


@pytest.fixture
def hub() -> Iterator[McpHub]:
    hub = McpHub()
    yield hub
    hub.shutdown()


@pytest.fixture(params=["demo", "web"], ids=["stdio", "http"])
def server(request: pytest.FixtureRequest, stdio_log: Path, http_demo: tuple[str, Path]) -> Any:
    """A server of the shared hub, by transport: its name and its `sleep` log."""
    return request.param, stdio_log if request.param == "demo" else http_demo[1]


# -- both transports ------------------------------------------------------------------------


async def test_tools_are_listed_with_names_and_schemas(shared_hub: McpHub, server: Any) -> None:
    name, _ = server
    tools = [t for t in await shared_hub.tools() if t.name.startswith(f"mcp_{name}_")]

    assert [t.name for t in tools] == [f"mcp_{name}_{tool}" for tool in DEMO_TOOLS]
    add = by_name(tools)[f"mcp_{name}_add"]
    assert isinstance(add, McpTool) and add.remote_name == "add"
    assert add.description == f"[MCP server '{name}'] Add two integers."
    assert add.parameters["type"] == "object"
    assert set(add.parameters["properties"]) == {"a", "b"}
    assert add.parameters["required"] == ["a", "b"]
    fail = by_name(tools)[f"mcp_{name}_fail"]
    assert fail.parameters["properties"] == {}
    # Callers cache registries by tool identity: an unchanged server gives the same objects.
    again = [t for t in await shared_hub.tools() if t.name.startswith(f"mcp_{name}_")]
    assert all(a is b for a, b in zip(tools, again, strict=True))


async def test_a_call_returns_the_tools_text(shared_hub: McpHub, server: Any) -> None:
    name, _ = server
    registry = ToolRegistry().with_tools(tuple(await shared_hub.tools()))

    assert await registry.execute(f"mcp_{name}_add", {"a": 2, "b": 40}) == "42"
    assert await registry.execute(f"mcp_{name}_echo", '{"text": "héllo"}') == "héllo"


async def test_an_error_result_reads_as_an_error(shared_hub: McpHub, server: Any) -> None:
    name, _ = server
    fail = by_name(await shared_hub.tools())[f"mcp_{name}_fail"]

    text = await fail.execute(ToolContext.detached())

    assert text.startswith("Error")
    assert "failed on purpose" in text


async def test_a_call_that_takes_too_long_is_an_error_after_the_timeout(
    shared_hub: McpHub, server: Any
) -> None:
    name, log = server
    sleep = by_name(await shared_hub.tools())[f"mcp_{name}_sleep"]
    seconds = 10.25 if name == "demo" else 10.5

    started = time.monotonic()
    text = await sleep.execute(ToolContext.detached(), seconds=seconds)

    assert time.monotonic() - started < 2.5
    assert text.startswith("Error") and "timed out after 1 s" in text, text
    # The server is told to stop the call.
    await wait_until(lambda: sleep_events(log, seconds) == ["started", "cancelled"])


async def test_cancelling_a_call_cancels_it_on_the_server(shared_hub: McpHub, server: Any) -> None:
    name, log = server
    tools = by_name(await shared_hub.tools())
    seconds = 20.25 if name == "demo" else 20.5
    ctx = ToolContext.detached()

    call = asyncio.create_task(tools[f"mcp_{name}_sleep"].execute(ctx, seconds=seconds))
    await wait_until(lambda: sleep_events(log, seconds) == ["started"])
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call

    await wait_until(lambda: sleep_events(log, seconds) == ["started", "cancelled"])
    # The shared session goes on serving calls.
    assert await tools[f"mcp_{name}_echo"].execute(ctx, text="still here") == "still here"


async def test_a_stopped_turn_ends_its_call(shared_hub: McpHub, stdio_log: Path) -> None:
    sleep = by_name(await shared_hub.tools())["mcp_demo_sleep"]
    ctx = ToolContext.detached()

    call = asyncio.create_task(sleep.execute(ctx, seconds=30.25))
    await wait_until(lambda: sleep_events(stdio_log, 30.25) == ["started"])
    ctx.cancelled.set()

    assert (await asyncio.wait_for(call, 5)).startswith("Error")
    await wait_until(lambda: sleep_events(stdio_log, 30.25) == ["started", "cancelled"])


def test_the_hub_serves_several_event_loops(shared_hub: McpHub) -> None:
    """Two `asyncio.run` one after the other, then two at once on two threads."""

    async def turn(text: str) -> str:
        tools = by_name(await shared_hub.tools())
        return await tools["mcp_demo_echo"].execute(ToolContext.detached(), text=text)

    assert asyncio.run(turn("one")) == "one"
    assert asyncio.run(turn("two")) == "two"
    results: dict[str, str] = {}
    threads = [
        threading.Thread(target=lambda t=t: results.__setitem__(t, asyncio.run(turn(t))))
        for t in ("three", "four")
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert results == {"three": "three", "four": "four"}


async def test_header_values_never_reach_the_log(
    http_demo: tuple[str, Path], hub: McpHub, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    secret = "Bearer header-secret-for-logs"
    hub.configure(
        [
            McpServerConfig(
                "web",
                "http",
                url=http_demo[0],
                headers=(("Authorization", secret),),
                trusted=True,
            ),
            McpServerConfig(
                "gone",
                "http",
                url=f"http://127.0.0.1:{free_port()}/mcp",
                headers=(("Authorization", secret),),
                trusted=True,
            ),
        ]
    )

    tools = by_name(await hub.tools())
    assert await tools["mcp_web_echo"].execute(ToolContext.detached(), text="x") == "x"

    assert "could not connect" in caplog.text
    assert "header-secret-for-logs" not in caplog.text
    assert "header-secret-for-logs" not in repr(hub.known_tools()[0].__dict__)


# -- stdio ----------------------------------------------------------------------------------


async def test_a_killed_server_is_noticed_and_restarted_on_the_next_call(hub: McpHub) -> None:
    hub.configure([stdio_demo()])
    tools = by_name(await hub.tools())
    ctx = ToolContext.detached()
    pid = int(await tools["mcp_demo_pid"].execute(ctx))

    os.kill(pid, signal.SIGKILL)
    await wait_until(lambda: hub.known_tools() == [])

    new_pid = int(await tools["mcp_demo_pid"].execute(ctx))
    assert new_pid != pid
    assert await tools["mcp_demo_add"].execute(ctx, a=1, b=1) == "2"
    # Same server, same tools: the objects callers hold stay valid.
    assert all(a is b for a, b in zip(tools.values(), await hub.tools(), strict=True))


async def test_a_server_that_dies_during_a_call_is_an_error_and_not_retried(
    hub: McpHub, tmp_path: Path
) -> None:
    log = tmp_path / "sleep.log"
    hub.configure([stdio_demo(log=log, tool_timeout=10.0)])
    tools = by_name(await hub.tools())
    ctx = ToolContext.detached()
    pid = int(await tools["mcp_demo_pid"].execute(ctx))

    call = asyncio.create_task(tools["mcp_demo_sleep"].execute(ctx, seconds=5.5))
    await wait_until(lambda: sleep_events(log, 5.5) == ["started"])
    os.kill(pid, signal.SIGKILL)

    text = await asyncio.wait_for(call, 5)
    assert text.startswith("Error") and "stopped" in text, text
    assert sleep_events(log, 5.5) == ["started"]  # not sent again
    assert int(await tools["mcp_demo_pid"].execute(ctx)) != pid


async def test_a_changed_config_disconnects_and_the_new_one_is_used(hub: McpHub) -> None:
    hub.configure([stdio_demo(env=(("DEMO_FLAVOUR", "old"),))])
    old = by_name(await hub.tools())
    ctx = ToolContext.detached()
    old_pid = int(await old["mcp_demo_pid"].execute(ctx))
    assert await old["mcp_demo_env"].execute(ctx, name="DEMO_FLAVOUR") == "old"

    hub.configure([stdio_demo(env=(("DEMO_FLAVOUR", "new"),), tool_timeout=2.0)])
    assert hub.known_tools() == []  # disconnected at once, nothing connected yet
    new = by_name(await hub.tools())

    assert await new["mcp_demo_env"].execute(ctx, name="DEMO_FLAVOUR") == "new"
    assert int(await new["mcp_demo_pid"].execute(ctx)) != old_pid
    assert all(new[name] is not old[name] for name in new)
    # The old process is stopped, not left behind.
    await wait_until(lambda: not _alive(old_pid))


async def test_a_removed_servers_tools_disappear(hub: McpHub) -> None:
    hub.configure([stdio_demo()])
    tools = by_name(await hub.tools())
    pid = int(await tools["mcp_demo_pid"].execute(ToolContext.detached()))

    hub.configure([])

    assert hub.known_tools() == []
    assert await hub.tools() == []
    text = await tools["mcp_demo_echo"].execute(ToolContext.detached(), text="x")
    assert text.startswith("Error") and "not configured" in text
    await wait_until(lambda: not _alive(pid))


async def test_broken_servers_are_left_out_quickly(
    hub: McpHub, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agent.tools.mcp")
    hub.configure(
        [
            McpServerConfig(
                "exits",
                "stdio",
                command=sys.executable,
                args=("-c", "import sys; sys.exit('no config here')"),
            ),
            McpServerConfig("nowhere", "stdio", command="/nonexistent/mcp-server"),
            McpServerConfig(
                "refused", "http", url=f"http://127.0.0.1:{free_port()}/mcp", trusted=True
            ),
            stdio_demo(),
        ]
    )

    started = time.monotonic()
    tools = await hub.tools()
    assert time.monotonic() - started < 8
    assert sorted(t.name for t in tools) == sorted(f"mcp_demo_{t}" for t in DEMO_TOOLS)
    for name in ("exits", "nowhere", "refused"):
        assert f"MCP server '{name}'" in caplog.text
    assert "no config here" in caplog.text  # the server's stderr, in our log
    assert "the server closed the connection" in caplog.text
    assert "No such file or directory" in caplog.text

    # Not tried again for a while: the next turn pays nothing for them.
    caplog.clear()
    started = time.monotonic()
    assert await hub.tools() == tools
    assert time.monotonic() - started < 0.5
    assert "could not connect" not in caplog.text


async def test_a_server_that_never_answers_is_given_up_after_the_connect_timeout(
    hub: McpHub, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr("agent.tools.mcp.connection.CONNECT_TIMEOUT", 1.0)
    hub.configure(
        [McpServerConfig("mute", "stdio", command="/bin/sh", args=("-c", "cat >/dev/null"))]
    )

    started = time.monotonic()
    assert await hub.tools() == []

    assert time.monotonic() - started < 3
    assert "MCP server 'mute'" in caplog.text and "no answer within 1 s" in caplog.text


async def test_a_server_that_keeps_failing_is_tried_ever_less_often(
    hub: McpHub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr("agent.tools.mcp.hub.RETRY_AFTER", 0.3)
    starts = tmp_path / "starts"
    hub.configure(
        [McpServerConfig("flaky", "stdio", command="/bin/sh", args=("-c", f"echo >> {starts}"))]
    )

    def tries() -> int:
        return len(starts.read_text().splitlines()) if starts.exists() else 0

    assert await hub.tools() == [] and tries() == 1
    await asyncio.sleep(0.35)  # past the first wait (0.3 s): tried again
    assert await hub.tools() == [] and tries() == 2
    await asyncio.sleep(0.35)  # not past the second (0.6 s)
    assert await hub.tools() == [] and tries() == 2
    await asyncio.sleep(0.3)
    assert await hub.tools() == [] and tries() == 3


async def test_the_child_gets_its_configured_env_and_none_of_ours(
    hub: McpHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTSITE_TEST_SECRET", "do-not-inherit")
    hub.configure([stdio_demo(env=(("DEMO_TOKEN", "given"),))])
    env = by_name(await hub.tools())["mcp_demo_env"]
    ctx = ToolContext.detached()

    assert await env.execute(ctx, name="AGENTSITE_TEST_SECRET") == "<unset>"
    assert await env.execute(ctx, name="DEMO_TOKEN") == "given"
    assert await env.execute(ctx, name="PATH") != "<unset>"


def test_known_tools_never_connects(hub: McpHub, tmp_path: Path) -> None:
    marker = tmp_path / "started"
    hub.configure(
        [McpServerConfig("probe", "stdio", command="/bin/sh", args=("-c", f"touch {marker}"))]
    )

    assert hub.known_tools() == []
    time.sleep(0.2)
    assert not marker.exists()


# -- a reference server from npm ------------------------------------------------------------


@pytest.fixture
def node() -> str:
    """Node.js, when it and the reference server are installed."""
    node = shutil.which("node")
    if node is None or not REFERENCE.exists():
        pytest.skip(
            "Node.js or the reference MCP server is missing: `make mcp-reference` installs it"
        )
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout
    if int(version.lstrip("v").split(".")[0] or 0) < 20:
        pytest.skip(f"the reference MCP server needs Node.js 20 or later, not {version.strip()}")
    return node


async def test_the_reference_filesystem_server(hub: McpHub, node: str, tmp_path: Path) -> None:
    hub.configure(
        [McpServerConfig("files", "stdio", command=node, args=(str(REFERENCE), str(tmp_path)))]
    )

    tools = by_name(await hub.tools())
    assert {"mcp_files_write_file", "mcp_files_read_text_file"} <= set(tools)
    assert tools["mcp_files_write_file"].description.startswith("[MCP server 'files'] ")
    registry = ToolRegistry().with_tools(tuple(tools.values()))

    path = str(tmp_path / "note.txt")
    written = await registry.execute("mcp_files_write_file", {"path": path, "content": "hi MCP"})
    assert not written.startswith("Error"), written
    assert (tmp_path / "note.txt").read_text() == "hi MCP"
    assert await registry.execute("mcp_files_read_text_file", {"path": path}) == "hi MCP"
    outside = await registry.execute("mcp_files_read_text_file", {"path": "/etc/hostname"})
    assert outside.startswith("Error")


# -- without servers ------------------------------------------------------------------------


def test_results_as_text() -> None:
    import mcp_types as types

    def result(*content: Any, **fields: Any) -> Any:
        return types.CallToolResult(content=list(content), **fields)

    text = result_text(
        result(
            types.TextContent(text="first"),
            types.ImageContent(data="aGVsbG8=", mime_type="image/png"),
            types.AudioContent(data="AAAA", mime_type="audio/wav"),
            types.EmbeddedResource(
                resource=types.TextResourceContents(uri="file:///a.txt", text="inside")
            ),
            types.EmbeddedResource(
                resource=types.BlobResourceContents(uri="file:///b.bin", blob="AAAA")
            ),
            types.ResourceLink(uri="file:///c.txt", name="c"),
        )
    )
    assert text.split("\n") == [
        "first",
        "[image: image/png, 5 bytes]",
        "[audio: audio/wav, 3 bytes]",
        "inside",
        "[resource: file:///b.bin, application/octet-stream, 3 bytes]",
        "file:///c.txt",
    ]
    assert result_text(result(structured_content={"a": 1})) == json.dumps({"a": 1})
    assert result_text(result(types.TextContent(text="bad"), is_error=True)) == "Error: bad"
    assert result_text(result(is_error=True)).startswith("Error")
    assert result_text(result()) == "(no output)"


def test_tool_names_are_sanitised_and_unique() -> None:
    import mcp_types as types

    config = McpServerConfig("srv", "stdio", command="x")
    listing = [
        types.Tool(name="get.weather now", input_schema={"type": "object"}),
        types.Tool(name="get_weather_now", input_schema={"type": "object"}),
        types.Tool(name="x" * 80, description="long", input_schema={}),
    ]

    tools = make_tools(McpHub(), config, listing)

    assert [t.name for t in tools] == [
        "mcp_srv_get_weather_now",
        "mcp_srv_get_weather_now_2",
        ("mcp_srv_" + "x" * 80)[:64],
    ]
    assert [t.remote_name for t in tools] == [tool.name for tool in listing]
    assert all(t.parameters == {"type": "object", "properties": {}} for t in tools)


def test_a_config_does_not_show_its_secrets() -> None:
    config = McpServerConfig(
        "x",
        "http",
        url="https://user:pw-secret@example.com/mcp?key=query-secret",
        headers=(("Authorization", "Bearer header-secret"),),
    )
    assert "secret" not in repr(config)
    assert config.describe() == "http: https://example.com/mcp"
    with pytest.raises(ValueError, match="name"):
        McpServerConfig("Bad Name", "stdio", command="x")


def test_importing_the_client_does_not_import_the_sdk() -> None:
    code = "import sys, agent.tools.mcp; print(sorted({'mcp', 'mcp_types', 'anyio'} & set(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
