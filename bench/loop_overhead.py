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
import resource
import sys
import tempfile
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._loops import (  # noqa: E402
    Loop,
    agent_loop,
    litellm_loop,
    per_round_trip_ms,
    script,
    setup_django,
)
from tests.llm_server import ScriptedLLM  # noqa: E402


async def timed(label: str, loop: Loop, server: ScriptedLLM, turns: int, tools: int) -> float:
    per_call, calls, elapsed = await per_round_trip_ms(loop, server, turns, tools)
    print(
        f"{label:<34} {calls:>5} round trips  {elapsed:7.2f} s  {per_call:7.2f} ms per round trip"
    )
    return per_call


async def run(server: ScriptedLLM, turns: int, tools: int) -> None:
    # Warm up both paths: imports, connection pools, the context-window lookup.
    script(server, 1, 1)
    await agent_loop(server.base_url, 1)
    script(server, 1, 1)
    await litellm_loop(server.base_url, 1)

    print(f"{turns} turns x {tools} tool calls, scripted model on {server.base_url}")
    agent = await timed("agent loop (turn service, DB)", agent_loop, server, turns, tools)
    bare = await timed("bare litellm loop", litellm_loop, server, turns, tools)
    print(f"ratio (agent / bare)               {agent / bare:.2f}  (aim: at most 1.5)")

    # Memory is measured on a separate pass: tracing slows everything it watches.
    tracemalloc.start()
    script(server, turns, tools)
    await agent_loop(server.base_url, turns)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory allocated during {turns} agent turns  {peak / 1e6:.1f} MB")
    print(f"process peak RSS                   {rss:.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--tools", type=int, default=5, help="tool calls per turn")
    args = parser.parse_args()

    with (
        tempfile.TemporaryDirectory(prefix="agentsite-bench-") as scratch,
        ScriptedLLM(context_window=128_000) as server,
    ):
        setup_django(Path(scratch), server)
        asyncio.run(run(server, args.turns, args.tools))


if __name__ == "__main__":
    main()
