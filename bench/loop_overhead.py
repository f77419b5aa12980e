"""What the agent loop costs on top of litellm itself.

Runs N turns of K tool calls against the scripted model (no delays) through the whole
turn service (context, history, tools, every message saved, run records), then the same
conversation through a bare litellm loop, and prints the milliseconds per model round trip
of each, their ratio, and peak memory.

    .venv/bin/python bench/loop_overhead.py [--turns N] [--tools K]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.llm_server import ScriptedLLM  # noqa: E402


def script(server: ScriptedLLM, turns: int, tools: int) -> None:
    for _ in range(turns):
        for _ in range(tools):
            server.tool_call("read_file", {"path": "hello.txt"})
        server.reply("All files read; they say Hello World.", chunks=8)


async def agent_loop(turns: int) -> None:
    from agent.service import run_turn

    for index in range(turns):
        result = await run_turn("bench:agent", f"read hello.txt, pass {index}", channel="bench")
        assert result.success, result.text


async def bare_loop(base_url: str, turns: int) -> None:
    """The least a tool loop can do with litellm: stream, collect calls, answer, repeat."""
    import litellm

    tool = {
        "type": "function",
        "function": {"name": "read_file", "parameters": {"type": "object", "properties": {}}},
    }
    messages: list[dict] = [{"role": "system", "content": "bench"}]
    for index in range(turns):
        messages.append({"role": "user", "content": f"read hello.txt, pass {index}"})
        while True:
            stream = await litellm.acompletion(
                model="openai/scripted",
                api_base=base_url,
                api_key="bench",
                messages=messages,
                tools=[tool],
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
            if not calls:
                messages.append({"role": "assistant", "content": text})
                break
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


async def timed(
    label: str, coroutine_factory, server: ScriptedLLM, turns: int, tools: int
) -> float:
    script(server, turns, tools)
    before = len(server.requests)
    started = time.perf_counter()
    await coroutine_factory()
    elapsed = time.perf_counter() - started
    calls = len(server.requests) - before
    per_call = elapsed * 1000 / calls
    print(
        f"{label:<34} {calls:>5} round trips  {elapsed:7.2f} s  {per_call:7.2f} ms per round trip"
    )
    return per_call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--tools", type=int, default=5, help="tool calls per turn")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="agentsite-bench-"))
    server = ScriptedLLM(context_window=128_000).start()
    os.environ.update(
        {
            "AGENT_DATA_DIR": str(scratch / "data"),
            "AGENT_WORKSPACE": str(scratch / "workspace"),
            "AGENT_MODEL": "openai/scripted",
            "AGENT_API_BASE": server.base_url,
            "AGENT_API_KEY": "bench",
            # A bench turn grows past the default window of 50 messages; keep it all.
            "AGENT_MEMORY_WINDOW": "1000",
            "DJANGO_SETTINGS_MODULE": "agentsite.settings",
        }
    )
    if "DATABASE_URL" not in os.environ:
        os.environ.pop("DATABASE_URL", None)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    (scratch / "workspace").mkdir(parents=True, exist_ok=True)
    (scratch / "workspace" / "hello.txt").write_text("Hello World\n")

    async def run() -> None:
        # Warm up both paths: imports, connection pools, the context-window lookup.
        script(server, 1, 1)
        await agent_loop(1)
        script(server, 1, 1)
        await bare_loop(server.base_url, 1)

        print(f"{args.turns} turns x {args.tools} tool calls, scripted model on {server.base_url}")
        agent = await timed(
            "agent loop (turn service, DB)",
            lambda: agent_loop(args.turns),
            server,
            args.turns,
            args.tools,
        )
        bare = await timed(
            "bare litellm loop",
            lambda: bare_loop(server.base_url, args.turns),
            server,
            args.turns,
            args.tools,
        )
        print(f"ratio (agent / bare)               {agent / bare:.2f}  (aim: at most 1.5)")

        # Memory is measured on a separate pass: tracing slows everything it watches.
        tracemalloc.start()
        script(server, args.turns, args.tools)
        await agent_loop(args.turns)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"peak memory allocated during {args.turns} agent turns  {peak / 1e6:.1f} MB")
        print(f"process peak RSS                   {rss:.0f} MB")

    asyncio.run(run())
    server.stop()


if __name__ == "__main__":
    main()
