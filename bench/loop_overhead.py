"""What the agent loop costs on top of litellm itself.

Runs N turns of K tool calls against the scripted model (no delays) through the whole
turn service (context, history, tools, every message saved, run records), then the same
conversation through a bare litellm loop, and prints the milliseconds per model round trip
of each, their ratio, and peak memory.

    .venv/bin/python bench/loop_overhead.py [--turns N] [--tools K] [--json PATH]
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
from bench._procs import children, scratch_services  # noqa: E402
from bench._report import Row, add_json_option, row, write_json  # noqa: E402

LITELLM_TARGET = 1.2
HTTPX_TARGET = 3.0


async def timed(label: str, loop: Loop, base_url: str, turns: int, tools: int) -> float:
    per_call, calls, elapsed = await per_round_trip_ms(loop, base_url, turns, tools)
    print(
        f"{label:<34} {calls:>5} round trips  {elapsed:7.2f} s  {per_call:7.2f} ms per round trip"
    )
    return per_call


async def run(base_url: str, turns: int, tools: int) -> list[Row]:
    # Warm up every path: imports, connection pools, the context-window lookup.
    for loop in (agent_loop, litellm_loop, httpx_loop):
        await loop(base_url, 1)

    print(f"{turns} turns x {tools} tool calls, scripted model in its own process at {base_url}")
    agent = await timed("agent loop (turn service, DB)", agent_loop, base_url, turns, tools)
    bare = await timed("bare litellm loop", litellm_loop, base_url, turns, tools)
    floor = await timed("bare httpx loop", httpx_loop, base_url, turns, tools)
    print(
        f"ratio (agent / litellm)            {agent / bare:.2f}  (aim: at most {LITELLM_TARGET:g})"
    )
    print(
        f"ratio (agent / httpx)              {agent / floor:.2f}  (aim: at most {HTTPX_TARGET:g})"
    )

    # Memory is measured on a separate pass: tracing slows everything it watches.
    tracemalloc.start()
    await agent_loop(base_url, turns)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory allocated during {turns} agent turns  {peak / 1e6:.1f} MB")
    print(f"process peak RSS                   {rss:.0f} MB")
    measure = "ms per model round trip, turn service vs bare"
    return [
        row("loop_overhead", f"{measure} litellm", agent, floor=bare, unit="ms",
            target=f"ratio ≤ {LITELLM_TARGET:g}", met=agent / bare <= LITELLM_TARGET),
        row("loop_overhead", f"{measure} httpx", agent, floor=floor, unit="ms",
            target=f"ratio ≤ {HTTPX_TARGET:g}", met=agent / floor <= HTTPX_TARGET),
        row("loop_overhead", "peak memory allocated in the turns", peak / 1e6, unit="MB"),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--tools", type=int, default=5, help="tool calls per turn")
    add_json_option(parser)
    args = parser.parse_args()

    with (
        scratch_services(),
        tempfile.TemporaryDirectory(prefix="agentsite-bench-") as scratch,
        children(Path(scratch) / "logs") as procs,
    ):
        base_url = start_model(procs, args.tools)
        setup_django(Path(scratch), base_url)
        rows = asyncio.run(run(base_url, args.turns, args.tools))
    write_json(args.json, rows)


if __name__ == "__main__":
    main()
