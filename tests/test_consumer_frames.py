"""Frames no message could be, sent to the chat WebSocket: each gets an error frame and the
socket stays open for the next message."""

from __future__ import annotations

import pytest

from tests.llm_server import ScriptedLLM
from tests.ws import open_chat, receive_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]

# Within the frame size the socket accepts, and far deeper than Python's recursion limit.
DEEP = "[" * 50_000 + "]" * 50_000


@pytest.mark.parametrize(
    "frame",
    [
        DEEP,
        '{"type": "message", "content": ' + DEEP + "}",
        '{"type": "\\ud800"}',
        '{"type": "message", "content": "hi \\ud800"}',
    ],
    ids=["deep", "deep-content", "lone-surrogate-type", "lone-surrogate-content"],
)
async def test_a_frame_no_message_could_be_gets_an_error(
    llm: ScriptedLLM, token: str, frame: str
) -> None:
    socket, _ = await open_chat("f1", token)
    await socket.send_to(text_data=frame)
    error = await socket.receive_json_from()
    assert error["type"] == "error" and error["message"]
    assert "\ud800" not in error["message"]

    await socket.send_json_to({"type": "message", "content": "/help"})
    reply = (await receive_until(socket, "message", role="assistant"))[-1]
    assert reply["content"].startswith("Commands")
    await socket.disconnect()
    assert llm.requests == []
