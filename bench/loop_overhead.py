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
    httpx_loop,
    litellm_loop,
    per_round_trip_ms,
    setup_django,
    start_model,
)
from bench._procs import children  # noqa: E402


async def timed(label: str, loop: Loop, base_url: str, turns: int, tools: int) -> float:
    per_call, calls, elapsed = await per_round_trip_ms(loop, base_url, turns, tools)
    print(
        f"{label:<34} {calls:>5} round trips  {elapsed:7.2f} s  {per_call:7.2f} ms per round trip"
    )
    return per_call


async def run(base_url: str, turns: int, tools: int) -> None:
    # Warm up every path: imports, connection pools, the context-window lookup.
    for loop in (agent_loop, litellm_loop, httpx_loop):
        await loop(base_url, 1)

    print(f"{turns} turns x {tools} tool calls, scripted model in its own process at {base_url}")
    agent = await timed("agent loop (turn service, DB)", agent_loop, base_url, turns, tools)
    bare = await timed("bare litellm loop", litellm_loop, base_url, turns, tools)
    floor = await timed("bare httpx loop", httpx_loop, base_url, turns, tools)
    print(f"ratio (agent / litellm)            {agent / bare:.2f}")
    print(f"ratio (agent / httpx)              {agent / floor:.2f}  (aim: at most 3)")

    # Memory is measured on a separate pass: tracing slows everything it watches.
    tracemalloc.start()
    await agent_loop(base_url, turns)
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
        children(Path(scratch) / "logs") as procs,
    ):
        base_url = start_model(procs, args.tools)
        setup_django(Path(scratch), base_url)
        asyncio.run(run(base_url, args.turns, args.tools))


if __name__ == "__main__":
    main()
