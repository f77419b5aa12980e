"""What one `exec` call costs, sandboxed and not, next to a bare subprocess (the floor).

    .venv/bin/python bench/exec_overhead.py [--calls 50] [--rounds 5] [--command true] [--json PATH]

Each round times `--calls` calls of each kind one after another; the figures are the
medians over the rounds, in milliseconds per call, with each one's ratio to the floor.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")

from agent.tools.base import ToolContext
from agent.tools.guards import Workspace
from agent.tools.sandbox import Limits, find_sandbox
from agent.tools.shell import ExecTool
from bench._report import Row, add_json_option, row, write_json

Call = Callable[[], Awaitable[object]]


async def per_call_ms(call: Call, calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        await call()
    return (time.perf_counter() - started) / calls * 1000


async def main(calls: int, rounds: int, command: str) -> list[Row]:
    find_sandbox()  # the one-time probe is not part of a call
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        sandboxed = ExecTool(Workspace(root), timeout=30, env={})
        # AGENT_EXEC_NETWORK=true: a network namespace of its own, behind slirp4netns.
        networked = ExecTool(Workspace(root), timeout=30, env={}, limits=Limits(network=True))
        ctx = ToolContext.detached("bench")
        unfenced = ExecTool(Workspace(root, restrict=False), timeout=30, env={"PATH": os.defpath})

        async def bare() -> object:
            proc = await asyncio.create_subprocess_exec(
                "/bin/sh", "-c", command, cwd=root, stdout=asyncio.subprocess.PIPE
            )
            return await proc.communicate()

        kinds: dict[str, Call] = {
            "bare subprocess (floor)": bare,
            "exec, unfenced": lambda: unfenced.execute(ctx, command=command),
            "exec, sandboxed": lambda: sandboxed.execute(ctx, command=command),
            "exec, sandboxed, network": lambda: networked.execute(ctx, command=command),
        }
        figures: dict[str, list[float]] = {name: [] for name in kinds}
        for _ in range(rounds):
            for name, call in kinds.items():
                figures[name].append(await per_call_ms(call, calls))
    floor = statistics.median(figures["bare subprocess (floor)"])
    print(f"{calls} calls of {command!r} x {rounds} rounds (medians)")
    for name, values in figures.items():
        median = statistics.median(values)
        print(f"  {name:<26} {median:8.2f} ms/call   x{median / floor:5.2f}")
    return [
        row("exec_overhead", f"ms per `{command}`, {name} vs bare subprocess",
            statistics.median(figures[name]), floor=floor, unit="ms")
        for name in ("exec, unfenced", "exec, sandboxed", "exec, sandboxed, network")
    ]  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--command", default="true")
    add_json_option(parser)
    args = parser.parse_args()
    write_json(args.json, asyncio.run(main(args.calls, args.rounds, args.command)))
