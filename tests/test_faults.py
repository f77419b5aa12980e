"""Faults injected into real turns. After each: the session's history is valid for the next
model call (no tool call without its result), the run record says what happened, and the
user reads a plain sentence, never a traceback."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import subprocess
import time
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User

from agent.events import Collector
from agent.tools import Tool, ToolContext
from agent.turn import SessionRef, run_turn
from sessions_app.models import Run
from tests.conftest import free_port
from tests.llm_server import ScriptedLLM
from tests.ws import open_chat, receive_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]


def assert_valid_history(request: dict[str, Any]) -> None:
    """Every tool call the model is shown has its result right after it, and no result
    comes without its call: providers refuse anything else."""
    messages = request["messages"]
    for index, message in enumerate(messages):
        calls = [call["id"] for call in message.get("tool_calls") or []]
        following = [m.get("tool_call_id") for m in messages[index + 1 : index + 1 + len(calls)]]
        assert following == calls, f"tool calls {calls} are answered by {following}"
        if message["role"] == "tool":
            before = messages[:index]
            assert any(
                message["tool_call_id"] in [c["id"] for c in m.get("tool_calls") or []]
                for m in before
            ), "a tool result without its call"


def assert_plain(text: str) -> None:
    assert text.strip()
    for leak in ("Traceback", 'File "', "Exception", "httpx.", "litellm."):
        assert leak not in text, text


FAULTS = {
    "500": lambda llm: llm.fault(500, body={"error": {"message": "upstream exploded"}}),
    "429": lambda llm: llm.fault(429, retry_after="0"),
    "hang": lambda llm: llm.hang(5),
    "drop": lambda llm: llm.drop("half an ans"),
    "garbage": lambda llm: llm.garbage("half an ans"),
}


@pytest.mark.parametrize("fault", FAULTS)
async def test_a_model_that_keeps_failing_mid_turn(
    llm: ScriptedLLM, ada: User, settings: Any, fault: str
) -> None:
    settings.AGENT_LLM_MAX_RETRIES = 1
    settings.AGENT_LLM_TIMEOUT = 0.5
    llm.tool_call("list_dir", {"path": "."})
    for _ in range(2):  # the call and its one retry
        FAULTS[fault](llm)
    events = Collector()

    result = await run_turn(SessionRef("web:f1", ada), "look around", channel="web", emit=events)

    run = await sync_to_async(Run.objects.get)(pk=result.run_id)
    assert run.status == "failed" and run.error
    assert run.tools_used == ["list_dir"] and run.iterations >= 1
    shown = [e.content for e in events.of_type("message") if e.role == "assistant"]
    assert shown == [result.text]
    assert_plain(result.text)

    llm.reply("Back again.")
    again = await run_turn(SessionRef("web:f1", ada), "and now?", channel="web")
    assert again.success
    assert_valid_history(llm.requests[-1])


class Stuck(Tool):
    name = "stuck"
    description = "Never returns."
    time_limit = 0.3

    async def execute(self, ctx: ToolContext, /, **kwargs: Any) -> str:
        await asyncio.sleep(3600)
        return "never"


async def test_a_tool_that_hangs_is_cut_off_and_the_turn_goes_on(
    llm: ScriptedLLM, ada: User, settings: Any
) -> None:
    settings.AGENT_TOOLS = ["tests.test_faults.Stuck"]
    llm.tool_call("stuck", {}).reply("That tool is stuck; here is what I know.")

    result = await run_turn(SessionRef("web:f2", ada), "try it", channel="web")

    assert result.success and result.text.startswith("That tool is stuck")
    result_text = llm.requests[-1]["messages"][-1]["content"]
    assert result_text.startswith("Error: stuck took longer than 0.3 seconds")
    assert_valid_history(llm.requests[-1])


@pytest.fixture
def private_redis(settings: Any) -> Any:
    """A Redis of the test's own for the channel layer, which the test may kill and start
    again on the same port."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (.ci/run installs it)")
    port = free_port()
    command = [
        binary,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
    ]

    class Server:
        process: subprocess.Popen[bytes] | None = None

        def start(self) -> None:
            self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
            deadline = time.monotonic() + 10
            while True:
                with socket.socket() as probe:
                    if probe.connect_ex(("127.0.0.1", port)) == 0:
                        return
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.05)

        def kill(self) -> None:
            assert self.process is not None
            self.process.kill()
            self.process.wait()

    server = Server()
    server.start()
    settings.CHANNEL_LAYERS = {
        "default": {
            # The production layer whatever the pass: this test needs its own Redis either way.
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {
                "hosts": [{"address": f"redis://127.0.0.1:{port}/0", "socket_timeout": None}]
            },
        }
    }
    yield server
    if server.process is not None and server.process.poll() is None:
        server.kill()


async def test_redis_restarting_mid_turn_loses_nothing(
    llm: ScriptedLLM, token: str, private_redis: Any
) -> None:
    llm.reply("An answer that takes its time.", delay=1.0)
    first, _ = await open_chat("r1", token)
    await first.send_json_to({"type": "message", "content": "take your time"})
    await receive_until(first, "thinking_started")

    private_redis.kill()  # the layer is gone while the model thinks
    await asyncio.sleep(0.2)
    private_redis.start()

    @sync_to_async
    def finished() -> Run | None:
        return Run.objects.filter(session__key="web:r1", finished__isnull=False).first()

    async with asyncio.timeout(15):
        while (run := await finished()) is None:
            await asyncio.sleep(0.1)
    assert run.status == "succeeded" and run.text == "An answer that takes its time."
    with contextlib.suppress(Exception):  # the socket may have died with the layer
        await first.disconnect()

    # A page that reconnects (as the chat page does) finds the whole answer.
    again, history = await open_chat("r1", token)
    contents = [m["content"] for m in history["messages"]]
    assert contents == ["take your time", "An answer that takes its time."]
    await again.disconnect()
