"""A failed turn on the chat socket: its message frame says it is an error, and the
history frame shows it again as one, where it was; a failure the agent tells in its own
words (the limit of model calls) stays its reply."""

from __future__ import annotations

from typing import Any

import pytest

from tests.llm_server import ScriptedLLM
from tests.ws import open_chat, receive_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]

FAILED = "The model provider rejected the request (HTTP 400). Try another model, or ask"


def shown(history: dict[str, Any]) -> list[tuple[str, str, bool]]:
    return [(m["role"], m["content"] or "", bool(m.get("error"))) for m in history["messages"]]


async def test_a_failed_turn_is_an_error_live_and_in_the_history(
    llm: ScriptedLLM, token: str
) -> None:
    llm.reply("First answer.")
    llm.fault(400)
    socket, _ = await open_chat("fail1", token)
    await socket.send_json_to({"type": "message", "content": "first"})
    answer = (await receive_until(socket, "message", role="assistant"))[-1]
    assert "error" not in answer
    await socket.send_json_to({"type": "message", "content": "second"})
    failed = (await receive_until(socket, "message", role="assistant"))[-1]
    await socket.disconnect()
    assert failed["error"] is True and failed["content"].startswith(FAILED)
    assert failed["usage"]["total_tokens"] == 0

    again, history = await open_chat("fail1", token)
    await again.disconnect()
    assert shown(history) == [
        ("user", "first", False),
        ("assistant", "First answer.", False),
        ("user", "second", False),
        ("assistant", failed["content"], True),
    ]
    entry = history["messages"][-1]
    assert entry["id"] is None and entry["run_id"] == failed["run_id"]
    assert entry["run_usage"]["total_tokens"] == 0


async def test_a_failure_after_tool_calls_comes_after_them_with_the_runs_usage(
    llm: ScriptedLLM, token: str
) -> None:
    llm.tool_call("list_dir", {"path": "."}, text="Looking first.")
    llm.fault(400)
    socket, _ = await open_chat("fail2", token)
    await socket.send_json_to({"type": "message", "content": "look around"})
    failed = (await receive_until(socket, "message", role="assistant"))[-1]
    await socket.disconnect()
    assert failed["error"] is True

    again, history = await open_chat("fail2", token)
    await again.disconnect()
    roles = [(m["role"], bool(m.get("error"))) for m in history["messages"]]
    assert roles == [("user", False), ("assistant", False), ("tool", False), ("assistant", True)]
    # What the run used goes with the error it ended with, not with the text before it.
    assert "run_usage" not in history["messages"][1]
    assert history["messages"][-1]["run_usage"]["total_tokens"] > 0


async def test_the_limit_of_model_calls_is_the_agents_reply_not_an_error(
    llm: ScriptedLLM, token: str, settings: Any
) -> None:
    settings.AGENT_MAX_ITERATIONS = 1
    llm.tool_call("list_dir", {"path": "."})
    socket, _ = await open_chat("fail3", token)
    await socket.send_json_to({"type": "message", "content": "keep going"})
    reply = (await receive_until(socket, "message", role="assistant"))[-1]
    await socket.disconnect()
    assert "AGENT_MAX_ITERATIONS" in reply["content"] and "error" not in reply

    again, history = await open_chat("fail3", token)
    await again.disconnect()
    assert not any(m.get("error") for m in history["messages"])
    assert history["messages"][-1]["content"] == reply["content"]
