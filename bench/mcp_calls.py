"""What an MCP tool call costs through the agent's hub, next to the SDK's own client on the
same server (the floor).

    .venv/bin/python bench/mcp_calls.py [--calls 200] [--rounds 5] [--json PATH]

Both talk to the tests' demo server over stdio and call its `echo` tool. The SDK client runs
on the caller's own loop; the hub runs on a thread of its own (so that every event loop of
the process can share one connection), and its calls also go through the tool registry's
argument check. Figures are medians over the rounds, in milliseconds per call.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.tools import ToolRegistry
from agent.tools.mcp import McpHub, McpServerConfig
from bench._report import Row, add_json_option, row, write_json

ROOT = Path(__file__).resolve().parent.parent

Call = Callable[[], Awaitable[object]]
SERVER = [sys.executable, "-m", "tests.mcp_servers.demo"]


async def per_call_ms(call: Call, calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        await call()
    return (time.perf_counter() - started) / calls * 1000


async def main(calls: int, rounds: int) -> list[Row]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=SERVER[0], args=SERVER[1:], cwd=str(ROOT))
    hub = McpHub()
    hub.configure([McpServerConfig("demo", "stdio", SERVER[0], tuple(SERVER[1:]), cwd=str(ROOT))])
    registry = ToolRegistry()
    started = time.perf_counter()
    for tool in await hub.tools():
        registry.register(tool)
    connect_ms = (time.perf_counter() - started) * 1000
    try:
        async with Client(params, cache=None) as client:

            async def floor() -> object:
                return await client.call_tool("echo", {"text": "hi"})

            async def ours() -> object:
                return await registry.execute("mcp_demo_echo", {"text": "hi"})

            kinds: dict[str, Call] = {"SDK client, same loop (floor)": floor, "agent hub": ours}
            figures: dict[str, list[float]] = {name: [] for name in kinds}
            for _ in range(rounds):
                for name, call in kinds.items():
                    figures[name].append(await per_call_ms(call, calls))
    finally:
        hub.shutdown()
    floor_ms = statistics.median(figures["SDK client, same loop (floor)"])
    print(f"MCP echo over stdio: {calls} calls x {rounds} rounds (medians)")
    print(f"  hub's first connect and tool listing: {connect_ms:.0f} ms")
    for name, values in figures.items():
        median = statistics.median(values)
        print(f"  {name:<30} {median:7.3f} ms/call   x{median / floor_ms:5.2f}")
    hub_ms = statistics.median(figures["agent hub"])
    return [
        row("mcp_calls", "ms per MCP call, hub vs SDK client", hub_ms, floor=floor_ms, unit="ms")
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    add_json_option(parser)
    args = parser.parse_args()
    write_json(args.json, asyncio.run(main(args.calls, args.rounds)))
