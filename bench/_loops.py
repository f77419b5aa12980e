"""One scripted tool-calling conversation, driven three ways: through the agent's turn
service, through a bare litellm loop, and through a bare httpx loop. Shared by
bench/loop_overhead.py and bench/cold_start.py.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench._procs import Children, bench_env, free_port

TOOL = {
    "type": "function",
    "function": {"name": "read_file", "parameters": {"type": "object", "properties": {}}},
}


def start_model(procs: Children, tools: int) -> str:
    """The scripted model in a process of its own, answering every user message with
    `tools` tool calls and then a reply; returns its base URL."""
    port = free_port()
    root = Path(__file__).resolve().parent.parent
    command = [sys.executable, "-m", "tests.llm_server", "--port", str(port)]
    model = procs.start([*command, "--tool-loop", str(tools)], name="llm_server", cwd=root)
    procs.wait_for_port(port, model)
    return f"http://127.0.0.1:{port}/v1"


def setup_django(scratch: Path, base_url: str, **settings: str) -> None:
    """Point this process at a migrated scratch install using the model at `base_url`
    (and `settings`, environment variables), with a file for the scripted conversation to
    read."""
    env = {**bench_env(scratch, base_url), **settings}
    # A bench turn grows past the default window of 50 messages; keep it all.
    env["AGENT_MEMORY_WINDOW"] = "1000"
    env["DJANGO_SETTINGS_MODULE"] = "agentsite.settings"
    os.environ.clear()
    os.environ.update(env)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    (scratch / "workspace").mkdir(parents=True, exist_ok=True)
    (scratch / "workspace" / "hello.txt").write_text("Hello World\n")


_conversations = itertools.count()


async def agent_loop(base_url: str, turns: int) -> None:
    from agent.turn.service import run_turn

    # A session of its own, as the bare loops start afresh: an earlier run's history would
    # make every request of this one longer.
    session = f"bench:agent{next(_conversations)}"
    for index in range(turns):
        result = await run_turn(session, f"read hello.txt, pass {index}", channel="bench")
        assert result.success, result.text


def _answer(messages: list[dict[str, Any]], text: str, calls: dict[int, dict[str, str]]) -> bool:
    """Append the model's answer, and a result for each tool call; False when it is final."""
    if not calls:
        messages.append({"role": "assistant", "content": text})
        return False
    messages.append(
        {
            "role": "assistant",
            "content": text or None,
            "tool_calls": [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c["args"]},
                }
                for c in calls.values()
            ],
        }
    )
    for c in calls.values():
        json.loads(c["args"])
        messages.append({"role": "tool", "tool_call_id": c["id"], "content": "Hello World"})
    return True


async def litellm_loop(base_url: str, turns: int) -> None:
    """The least a tool loop can do with litellm: stream, collect calls, answer, repeat."""
    import litellm

    messages: list[dict[str, Any]] = [{"role": "system", "content": "bench"}]
    for index in range(turns):
        messages.append({"role": "user", "content": f"read hello.txt, pass {index}"})
        while True:
            stream = await litellm.acompletion(
                model="openai/scripted",
                api_base=base_url,
                api_key="bench",
                messages=messages,
                tools=[TOOL],
                stream=True,
                stream_options={"include_usage": True},
            )
            text, calls = "", {}
            async for chunk in stream:
                if not chunk.choices:
                    continue
                delta = chunk.choices[0].delta
                text += delta.content or ""
                for tc in delta.tool_calls or ():
                    call = calls.setdefault(tc.index, {"id": tc.id, "name": "", "args": ""})
                    call["name"] += tc.function.name or ""
                    call["args"] += tc.function.arguments or ""
            if not _answer(messages, text, calls):
                break


async def httpx_loop(base_url: str, turns: int) -> None:
    """The same loop on bare httpx: POST, read the SSE `data:` lines, parse them as JSON."""
    import httpx

    # One client, and so one connection pool, for the whole conversation, as an SDK keeps.
    async with httpx.AsyncClient(
        base_url=base_url, headers={"Authorization": "Bearer bench"}, timeout=60
    ) as client:
        await _httpx_turns(client, turns)


async def _httpx_turns(client: Any, turns: int) -> None:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "bench"}]
    for index in range(turns):
        messages.append({"role": "user", "content": f"read hello.txt, pass {index}"})
        while True:
            body = {
                "model": "scripted",
                "messages": messages,
                "tools": [TOOL],
                "stream": True,
                "stream_options": {"include_usage": True},
            }
            text, calls = "", {}
            async with client.stream("POST", "/chat/completions", json=body) as response:
                response.raise_for_status()
                async for line in response.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    chunk = json.loads(data)
                    if not chunk.get("choices"):
                        continue
                    delta = chunk["choices"][0].get("delta") or {}
                    text += delta.get("content") or ""
                    for tc in delta.get("tool_calls") or ():
                        call = calls.setdefault(
                            tc["index"], {"id": tc.get("id"), "name": "", "args": ""}
                        )
                        function = tc.get("function") or {}
                        call["name"] += function.get("name") or ""
                        call["args"] += function.get("arguments") or ""
            if not _answer(messages, text, calls):
                break


Loop = Callable[[str, int], Awaitable[None]]


async def per_round_trip_ms(
    loop: Loop, base_url: str, turns: int, tools: int
) -> tuple[float, int, float]:
    """Run `turns` turns through `loop` against a model started with `--tool-loop tools`;
    return ms per model round trip, round trips and seconds in all."""
    started = time.perf_counter()
    await loop(base_url, turns)
    elapsed = time.perf_counter() - started
    calls = turns * (tools + 1)
    return elapsed * 1000 / calls, calls, elapsed
