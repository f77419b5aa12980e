"""The lean path's own OpenAI-compatible streaming client against the openai SDK's, with
bare HTTP clients as floors.

    .venv/bin/python bench/model_client.py [--chunks 2000] [--round-trips 200] [--runs 5] [--json PATH]

The clients, each in a fresh process of its own per run, taking turns:

  wire          `agent.llm.wire` as the product uses it (aiohttp, its own SSE reader)
  wire on httpx the same SSE reader (`wire.events`) over httpx, the stack the SDK uses
  openai SDK    `AsyncOpenAI().chat.completions.create(stream=True)` (httpx, pydantic)
  bare aiohttp  aiohttp's lines, each parsed as JSON: the floor of the wire's stack
  bare httpx    httpx's lines, each parsed as JSON: the floor of the SDK's stack

Measured, against the scripted model in a process of its own:

  import         ms for a fresh interpreter to import the client (not for the wire's
                 reader on httpx, whose module imports both stacks here)
  CPU per chunk  µs of the process's CPU per streamed chunk: a reply of a tenth of the
                 chunks and one of all of them, the difference over the difference
  round trip     ms of wall time per warm request answered by a one-chunk stream

Medians over the runs of each process's figures (a round trip's: the median of its own
requests first), since the machine is noisy. The product keeps its own client while it
costs less than the SDK on all three; agent/llm/wire.py says why it speaks aiohttp.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._procs import Children, children, free_port  # noqa: E402
from bench._report import Row, add_json_option, row, write_json  # noqa: E402
from bench.chunk_cpu import STAMP, aiohttp_stream, httpx_stream  # noqa: E402

PYTHON = sys.executable
HEADERS = {"Authorization": "Bearer bench"}
# What each client's process imports before its first request. The wire's reader on httpx
# would import the wire's module with both stacks: its import is the cold start's to tell
# (bench/cold_start.py --only cli, with the wire ported to httpx).
IMPORTS = {
    "wire": "agent.llm.wire",
    "sdk": "openai",
    "aiohttp": "aiohttp",
    "httpx": "httpx",
}
LABELS = {
    "wire": "wire (the product's lean path)",
    "wire-httpx": "wire's SSE reader on httpx",
    "sdk": "openai SDK, AsyncOpenAI",
    "aiohttp": "bare aiohttp SSE (floor)",
    "httpx": "bare httpx SSE (floor)",
}
Stream = Callable[[int], Awaitable[int]]


# -- the clients, in a process of their own -------------------------------------------------


def _stamps(content: str | None) -> int:
    return len(STAMP.findall(content or ""))


def _messages(chunks: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"stamps {chunks}"}]


async def with_stream(kind: str, base_url: str, use: Callable[[Stream], Awaitable[Any]]) -> Any:
    """Call `use` with a function that streams a reply of N chunks through `kind` and
    returns how many arrived; the client's pool stays open meanwhile, as in the product."""
    if kind == "wire":
        from agent.llm import wire

        target = wire.target(
            "openai/scripted", api_base=base_url, api_key="bench", openai_base="", openai_key=""
        )

        async def via_wire(chunks: int) -> int:
            body = wire.request_body(target, _messages(chunks), None, temperature=0, max_tokens=99)
            received = 0
            async for chunk in wire.stream_chunks(target, body, http_timeout=60):
                for choice in chunk.get("choices") or ():
                    received += _stamps((choice.get("delta") or {}).get("content"))
            return received

        return await use(via_wire)
    if kind == "sdk":
        import openai

        sdk = openai.AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0)

        async def via_sdk(chunks: int) -> int:
            stream = await sdk.chat.completions.create(
                model="scripted",
                messages=_messages(chunks),  # type: ignore[arg-type]
                stream=True,
                stream_options={"include_usage": True},
            )
            received = 0
            async for chunk in stream:
                if chunk.choices:
                    received += _stamps(chunk.choices[0].delta.content)
            return received

        async with sdk:
            return await use(via_sdk)
    if kind == "aiohttp":
        import aiohttp

        async with aiohttp.ClientSession(headers=HEADERS) as session:
            return await use(lambda chunks: aiohttp_stream(session, base_url, chunks))
    import httpx

    async with httpx.AsyncClient(base_url=base_url, headers=HEADERS, timeout=60) as client:
        if kind == "httpx":
            return await use(lambda chunks: httpx_stream(client, chunks))
        from agent.llm import wire

        async def via_wire_on_httpx(chunks: int) -> int:
            body = {**_sse_body(chunks), "model": "scripted"}
            received = 0
            async with client.stream("POST", "/chat/completions", json=body) as response:
                body_bytes = response.aiter_bytes()
                async for chunk in wire.events(body_bytes):
                    for choice in chunk.get("choices") or ():
                        received += _stamps((choice.get("delta") or {}).get("content"))
                async for _ in body_bytes:  # the rest, so that the connection is kept
                    pass
            return received

        return await use(via_wire_on_httpx)


def _sse_body(chunks: int) -> dict[str, Any]:
    return {
        "messages": _messages(chunks),
        "stream": True,
        "stream_options": {"include_usage": True},
    }


async def client_main(kind: str, base_url: str, sizes: list[int], trips: int) -> dict[str, Any]:
    """CPU seconds for each size, and the median wall time of a one-chunk round trip."""

    async def use(stream: Stream) -> dict[str, Any]:
        await stream(min(sizes))  # the connection, the first call's own set-up
        cpu: dict[str, float] = {}
        for size in sizes:
            before = time.process_time()
            received = await stream(size)
            cpu[str(size)] = time.process_time() - before
            if received != size:
                raise RuntimeError(f"{kind}: asked for {size} chunks, received {received}")
        walls = []
        for _ in range(trips):
            started = time.perf_counter()
            await stream(1)
            walls.append(time.perf_counter() - started)
        return {"cpu": cpu, "round_trip": statistics.median(walls)}

    return await with_stream(kind, base_url, use)


def import_seconds(procs: Children, kind: str) -> float:
    """Seconds a fresh interpreter takes to import what `kind` needs, and nothing else."""
    program = (
        "import time; started = time.perf_counter(); "
        f"import {IMPORTS[kind]}; print(time.perf_counter() - started)"
    )
    out = procs.run([PYTHON, "-c", program], name=f"import-{kind}", cwd=ROOT, timeout=120)
    return float(out.split()[-1])


# -- the runs --------------------------------------------------------------------------------


def run_client(procs: Children, args: list[str], name: str) -> Any:
    out = procs.run([PYTHON, __file__, *args], name=name, cwd=ROOT, timeout=300)
    return json.loads(out.splitlines()[-1])


def measure_all(chunks: int, trips: int, runs: int) -> list[Row]:
    short = max(10, chunks // 10)
    sizes = [short, chunks]
    imports: dict[str, list[float]] = {kind: [] for kind in LABELS}
    per_chunk: dict[str, list[float]] = {kind: [] for kind in LABELS}
    round_trip: dict[str, list[float]] = {kind: [] for kind in LABELS}
    with (
        tempfile.TemporaryDirectory(prefix="agentsite-modelclient-") as folder,
        children(Path(folder) / "logs") as procs,
    ):
        port = free_port()
        command = [PYTHON, str(ROOT / "bench" / "chunk_cpu.py"), "--serve-model", str(port)]
        model = procs.start(command, name="model", cwd=ROOT)
        procs.wait_for_port(port, model)
        base_url = f"http://127.0.0.1:{port}/v1"
        for _ in range(runs):
            for kind in LABELS:
                if kind in IMPORTS:
                    imports[kind].append(import_seconds(procs, kind))
                args = ["--client", kind, "--base-url", base_url, "--trips", str(trips)]
                out = run_client(procs, [*args, "--sizes", *map(str, sizes)], f"client-{kind}")
                cpu = out["cpu"]
                per_chunk[kind].append((cpu[str(chunks)] - cpu[str(short)]) / (chunks - short))
                round_trip[kind].append(out["round_trip"])

    med = {
        kind: (
            statistics.median(imports[kind]) * 1e3 if imports[kind] else math.nan,
            statistics.median(per_chunk[kind]) * 1e6,
            statistics.median(round_trip[kind]) * 1e3,
        )
        for kind in LABELS
    }
    print(
        f"The model client, streamed replies of {chunks} and {short} chunks and {trips} one-chunk "
        f"round trips from the scripted model in its own process; medians of {runs} runs"
    )
    print(
        f"   {'':<32} {'import ms':>9} {'µs/chunk':>9} {'x floor':>8} {'round trip ms':>14} "
        f"{'x floor':>8}"
    )
    floor_of = {"wire": "aiohttp", "wire-httpx": "httpx", "sdk": "httpx"}
    for kind, (imported, chunk_us, trip_ms) in med.items():
        floor = med[floor_of.get(kind, kind)]
        shown = f"{imported:9.0f}" if math.isfinite(imported) else f"{'-':>9}"
        print(
            f"   {LABELS[kind]:<32} {shown} {chunk_us:9.1f} {chunk_us / floor[1]:8.2f} "
            f"{trip_ms:14.2f} {trip_ms / floor[2]:8.2f}"
        )
    print("   x floor: against the bare client of the same HTTP stack")
    print("   The product keeps the wire while it costs less than the SDK on all three.")
    wire, sdk, bare = med["wire"], med["sdk"], med["aiohttp"]
    beats = "ratio < 1: the wire is kept"
    return [
        row("model_client", "import ms, wire vs openai SDK", wire[0], floor=sdk[0], unit="ms",
            target=beats, met=wire[0] < sdk[0]),
        row("model_client", "CPU per chunk, wire vs openai SDK", wire[1], floor=sdk[1],
            unit="µs", target=beats, met=wire[1] < sdk[1]),
        row("model_client", "CPU per chunk, wire vs bare aiohttp", wire[1], floor=bare[1],
            unit="µs"),
        row("model_client", "round trip, wire vs openai SDK", wire[2], floor=sdk[2], unit="ms",
            target=beats, met=wire[2] < sdk[2]),
        row("model_client", "round trip, wire vs bare aiohttp", wire[2], floor=bare[2],
            unit="ms"),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=2000, help="chunks of the long reply")
    parser.add_argument("--round-trips", type=int, default=200, help="per client and run")
    parser.add_argument("--runs", type=int, default=5, help="runs (default 5)")
    add_json_option(parser)
    # The roles of the child processes this bench starts.
    parser.add_argument("--client", choices=LABELS, help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    parser.add_argument("--sizes", type=int, nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--trips", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        result = asyncio.run(client_main(args.client, args.base_url, args.sizes, args.trips))
        print(json.dumps(result))
        return
    if args.chunks < 20 or args.runs < 1 or args.round_trips < 1:
        parser.error("--chunks takes 20 or more, --runs and --round-trips 1 or more")
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    try:
        rows = measure_all(args.chunks, args.round_trips, args.runs)
    except KeyboardInterrupt:
        print("\ninterrupted; every process the bench started is stopped", file=sys.stderr)
        sys.exit(130)
    write_json(args.json, rows)


if __name__ == "__main__":
    main()
