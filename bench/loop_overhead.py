"""What the agent loop costs on top of litellm itself.

Runs N turns of K tool calls against the scripted model (no delays) through the whole
turn service (context, history, tools, every message saved, run records), then the same
conversation through a bare litellm loop, and prints the milliseconds per model round trip
of each, their ratio, and peak memory. Then what recording the runs' traces costs: the turn
service with AGENT_TRACE off and on, in alternating rounds.

    .venv/bin/python bench/loop_overhead.py [--turns N] [--tools K] [--trace on|off]
        [--trace-rounds R] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
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
# Recording each model call and tool call costs at most this much per round trip.
TRACE_TARGET = 1.05


async def timed(label: str, loop: Loop, base_url: str, turns: int, tools: int) -> float:
    per_call, calls, elapsed = await per_round_trip_ms(loop, base_url, turns, tools)
    print(
        f"{label:<34} {calls:>5} round trips  {elapsed:7.2f} s  {per_call:7.2f} ms per round trip"
    )
    return per_call


async def trace_cost(base_url: str, turns: int, tools: int, rounds: int) -> tuple[float, float]:
    """ms per round trip of the turn service with AGENT_TRACE off and on: medians of
    `rounds` rounds, each running both, so that a noisy machine's drift falls on both."""
    from django.conf import settings

    off: list[float] = []
    on: list[float] = []
    for round_ in range(rounds):
        # Each first in every other round: a later turn finds a larger database.
        order = ((False, off), (True, on))
        for traced, figures in order if round_ % 2 else order[::-1]:
            settings.AGENT_TRACE = traced
            figures.append((await per_round_trip_ms(agent_loop, base_url, turns, tools))[0])
    return statistics.median(off), statistics.median(on)


async def run(
    base_url: str, turns: int, tools: int, *, traced: bool = True, trace_rounds: int = 5
) -> list[Row]:
    from django.conf import settings

    settings.AGENT_TRACE = traced
    # Warm up every path: imports, connection pools, the context-window lookup.
    for loop in (agent_loop, litellm_loop, httpx_loop):
        await loop(base_url, 1)

    print(f"{turns} turns x {tools} tool calls, scripted model in its own process at {base_url}")
    label = f"agent loop (turn service, DB, trace {'on' if traced else 'off'})"
    agent = await timed(label, agent_loop, base_url, turns, tools)
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

    untraced, traced_ms = await trace_cost(base_url, turns, tools, trace_rounds)
    settings.AGENT_TRACE = traced
    print(
        f"trace off / on (median of {trace_rounds})    {untraced:7.2f} / {traced_ms:.2f} ms per "
        f"round trip, ratio {traced_ms / untraced:.3f}  (aim: at most {TRACE_TARGET:g})"
    )
    measure = "ms per model round trip, turn service vs bare"
    return [
        row("loop_overhead", f"{measure} litellm", agent, floor=bare, unit="ms",
            target=f"ratio ≤ {LITELLM_TARGET:g}", met=agent / bare <= LITELLM_TARGET),
        row("loop_overhead", f"{measure} httpx", agent, floor=floor, unit="ms",
            target=f"ratio ≤ {HTTPX_TARGET:g}", met=agent / floor <= HTTPX_TARGET),
        row("loop_overhead", "peak memory allocated in the turns", peak / 1e6, unit="MB"),
        row("loop_overhead", "ms per model round trip, trace on vs off", traced_ms,
            floor=untraced, unit="ms", target=f"ratio ≤ {TRACE_TARGET:g}",
            met=traced_ms <= TRACE_TARGET * untraced),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--tools", type=int, default=5, help="tool calls per turn")
    parser.add_argument(
        "--trace", choices=["on", "off"], default="on", help="AGENT_TRACE for the first figures"
    )
    parser.add_argument(
        "--trace-rounds", type=int, default=5, help="rounds of trace off and on compared"
    )
    add_json_option(parser)
    args = parser.parse_args()

    with (
        scratch_services(),
        tempfile.TemporaryDirectory(prefix="agentsite-bench-") as scratch,
        children(Path(scratch) / "logs") as procs,
    ):
        base_url = start_model(procs, args.tools)
        setup_django(Path(scratch), base_url)
        rows = asyncio.run(
            run(
                base_url,
                args.turns,
                args.tools,
                traced=args.trace == "on",
                trace_rounds=args.trace_rounds,
            )
        )
    write_json(args.json, rows)


if __name__ == "__main__":
    main()
