"""An "always" answer of a chat, through its WebSocket: every tab hears the tools it allows
(`allowed_tools`), a tab that opens reads them in `history`, and `forget_always` takes one
back for good: the session forgets it and the next call of the tool waits again."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sessions_app.models import Session
from tests.llm_server import ScriptedLLM
from tests.ws import open_chat, receive_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]


@pytest.fixture(autouse=True)
def _write_file_waits(settings: Any) -> None:
    settings.AGENT_APPROVE_TOOLS = ["write_file"]


@sync_to_async
def allowed_in(key: str) -> list[str]:
    return list(Session.objects.get(key=key).allowed_tools)


async def test_an_always_is_heard_in_every_tab_and_taken_back_for_good(
    llm: ScriptedLLM, token: str
) -> None:
    llm.tool_call("write_file", {"path": "a.txt", "content": "A"}).reply("Written.")
    first, history = await open_chat("fa1", token)
    assert history["allowed_tools"] == []
    second, _ = await open_chat("fa1", token)

    await first.send_json_to({"type": "message", "content": "write a.txt"})
    request = (await receive_until(first, "approval_request"))[-1]
    await receive_until(first, "thinking_finished")
    await receive_until(second, "approval_request")
    await first.send_json_to(
        {"type": "approve", "id": request["id"], "allow": True, "always": True}
    )
    for socket in (first, second):
        frames = await receive_until(socket, "allowed_tools")
        assert frames[-1] == {"type": "allowed_tools", "tools": ["write_file"]}
    await receive_until(first, "thinking_finished")

    third, reopened = await open_chat("fa1", token)
    assert reopened["allowed_tools"] == ["write_file"]

    await second.send_json_to({"type": "forget_always", "tool": "write_file"})
    for socket in (first, second, third):
        frames = await receive_until(socket, "allowed_tools")
        assert frames[-1] == {"type": "allowed_tools", "tools": []}
    assert await allowed_in("web:fa1") == []

    # A tool the chat does not allow: nothing changes, and the tab hears the list as it is.
    await second.send_json_to({"type": "forget_always", "tool": "exec"})
    assert (await receive_until(second, "allowed_tools"))[-1]["tools"] == []

    # Forgotten: the next call of it waits again.
    llm.tool_call("write_file", {"path": "b.txt", "content": "B"})
    await first.send_json_to({"type": "message", "content": "write b.txt"})
    asked = await receive_until(first, "approval_request")
    assert asked[-1]["arguments"] == {"path": "b.txt", "content": "B"}
    for socket in (first, second, third):
        await socket.disconnect()


@pytest.mark.parametrize(
    "frame",
    [
        {"type": "forget_always"},
        {"type": "forget_always", "tool": ""},
        {"type": "forget_always", "tool": ["exec"]},
        {"type": "forget_always", "tool": "x" * 201},
    ],
)
async def test_a_forget_always_without_a_tool_name_is_an_error(
    token: str, frame: dict[str, Any]
) -> None:
    socket, _ = await open_chat("fa2", token)
    await socket.send_json_to(frame)
    error = await socket.receive_json_from(timeout=10)
    assert error["type"] == "error"
    assert '{"type": "forget_always", "tool": "<tool name>"}' in error["message"]
    await socket.disconnect()
