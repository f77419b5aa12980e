"""MCP servers through the product's doors: a server saved like the admin saves it is offered
in the next turn, called by the model, listed by `/api/tools` but never connected by
`/api/health`, cut off by its `tool_timeout`, and stopped mid-call by `/stop`."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agent.tools.mcp import mcp_hub
from agent.turn import SessionRef, run_turn
from mcp_app import services
from mcp_app.models import McpServer
from sessions_app.models import Message, Run
from tests.conftest import ROOT
from tests.llm_server import ScriptedLLM
from tests.ws import open_chat, receive_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]


@pytest.fixture(autouse=True)
def _no_servers_left() -> Iterator[None]:
    """The hub is the process's: what a test connected is closed before the next one."""
    yield
    mcp_hub().configure([])


def demo(tmp_path: Path, *, name: str = "demo", before: str = "", **fields: Any) -> McpServer:
    """The tests' demo server over stdio, saved as staff save one; `before` runs first."""
    start = f"{before}; " if before else ""
    return services.create_server(
        name=name,
        transport="stdio",
        command="/bin/sh",
        args=["-c", f'{start}exec "{sys.executable}" -m tests.mcp_servers.demo'],
        env={"PYTHONPATH": str(ROOT), "MCP_DEMO_LOG": str(tmp_path / "demo.log")},
        **fields,
    )


def offered(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {tool["function"]["name"]: tool["function"] for tool in request.get("tools") or []}


def tool_results(key: str) -> list[str]:
    found = Message.objects.filter(session__key=key, role="tool")
    return list(found.values_list("content", flat=True))


async def test_a_servers_tools_are_offered_called_and_follow_its_settings(
    llm: ScriptedLLM, ada: User, tmp_path: Path
) -> None:
    server = await sync_to_async(demo)(tmp_path)
    llm.tool_call("mcp_demo_add", {"a": 2, "b": 40}).reply("It is 42.")

    result = await run_turn(SessionRef("web:m1", ada), "add 2 and 40", channel="web")

    assert result.success and result.text == "It is 42."
    add = offered(llm.requests[0])["mcp_demo_add"]
    assert add["parameters"]["required"] == ["a", "b"]
    assert "read_file" in offered(llm.requests[0])  # beside the built-in tools
    assert await sync_to_async(tool_results)("web:m1") == ["42"]

    # Disabled (as the admin's action does), it is gone at the next turn, with no restart.
    await sync_to_async(services.set_enabled)(server=server, enabled=False)
    llm.reply("No MCP tools now.")
    await run_turn(SessionRef("web:m1", ada), "again", channel="web")
    assert not [name for name in offered(llm.requests[-1]) if name.startswith("mcp_")]


async def test_a_call_past_the_servers_timeout_reads_as_an_error_and_the_turn_goes_on(
    llm: ScriptedLLM, ada: User, tmp_path: Path
) -> None:
    await sync_to_async(demo)(tmp_path, tool_timeout=1)
    llm.tool_call("mcp_demo_sleep", {"seconds": 20}).reply("It took too long.")

    started = time.monotonic()
    result = await run_turn(SessionRef("web:m2", ada), "sleep", channel="web")

    assert result.success and time.monotonic() - started < 10
    (text,) = await sync_to_async(tool_results)("web:m2")
    assert text.startswith("Error") and "timed out after 1" in text


def test_api_tools_lists_them_and_health_never_connects(
    ada: User, token: str, tmp_path: Path, settings: Any, workspace: Path
) -> None:
    marker = tmp_path / "started"
    demo(tmp_path, before=f"pwd > {marker}")
    client = APIClient()

    health = client.get("/api/health").json()
    assert "read_file" in health["tools"]
    assert not [name for name in health["tools"] if name.startswith("mcp_")]
    assert not marker.exists()

    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    tools = {tool["name"]: tool for tool in client.get("/api/tools").json()}
    assert tools["mcp_demo_echo"]["parameters"]["properties"]["text"]["type"] == "string"
    # Started, and not in the workspace, where the model could plant code for it to load.
    assert marker.read_text().strip() == str(Path(settings.DATA_DIR).resolve() / "mcp")
    assert str(workspace) not in marker.read_text()

    assert "mcp_demo_echo" in client.get("/api/health").json()["tools"]


async def test_stop_cancels_a_call_in_flight(
    llm: ScriptedLLM, ada: User, token: str, tmp_path: Path
) -> None:
    await sync_to_async(demo)(tmp_path)
    llm.tool_call("mcp_demo_sleep", {"seconds": 30})
    socket, _ = await open_chat("m3", token)
    await socket.send_json_to({"type": "message", "content": "take your time"})
    await receive_until(socket, "tool_call")
    log = tmp_path / "demo.log"
    async with asyncio.timeout(10):
        while "started" not in (log.read_text() if log.exists() else ""):
            await asyncio.sleep(0.05)

    stopped = time.monotonic()
    await socket.send_json_to({"type": "stop"})
    frames = await receive_until(socket, "thinking_finished")
    assert time.monotonic() - stopped < 5
    assert next(f for f in frames if f["type"] == "tool_result")["result"].startswith("Error")
    await socket.disconnect()

    async with asyncio.timeout(5):  # the server was told, and its tool was interrupted
        while "cancelled" not in log.read_text():
            await asyncio.sleep(0.05)
    run = await sync_to_async(Run.objects.get)(session__key="web:m3")
    assert run.status == "cancelled"
    roles = await sync_to_async(
        lambda: [m.role for m in Message.objects.filter(session__key="web:m3")]
    )()
    assert roles == ["user", "assistant", "tool"]  # the call has its result
