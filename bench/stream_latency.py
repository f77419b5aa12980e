"""How fast streamed tokens reach a browser-side client, through one daphne process.

The scripted model (its own process) streams CHUNKS pieces per answer, each carrying the
time it was sent. WebSocket clients (this process) open chats on a daphne process running
the site, send one message each, and record when every chunk arrives. Prints chunks per
second, the p50/p99 delay from the model emitting a chunk to the client receiving it, the
daphne process's CPU time per chunk, and how many chunks never arrived, for 1 and for 50
concurrent sessions.

    .venv/bin/python bench/stream_latency.py [--chunks 2000] [--sessions 1 50] [--json PATH]
    .venv/bin/python bench/stream_latency.py --chunks 500 --interval 0.01   # 100 chunks/s each
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import websockets

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._procs import (  # noqa: E402
    bench_env,
    children,
    cpu_seconds,
    daphne_argv,
    free_port,
    scratch_services,
)
from bench._report import Row, add_json_option, row, write_json  # noqa: E402

STAMP = re.compile(r"<(\d+)>")


async def one_session(url: str, index: int, delays: list[float]) -> int:
    received = 0
    async with websockets.connect(url.format(chat=f"bench{index}"), max_size=None) as ws:
        history = json.loads(await ws.recv())
        assert history["type"] == "history", history
        await ws.send(json.dumps({"type": "message", "content": "stream please"}))
        while True:
            frame = json.loads(await ws.recv())
            now = time.time_ns()
            if frame["type"] == "stream_chunk":
                for stamp in STAMP.findall(frame["content"]):
                    delays.append((now - int(stamp)) / 1e6)
                    received += 1
            elif frame["type"] == "message" and frame.get("role") == "assistant":
                return received
            elif frame["type"] == "error":
                raise RuntimeError(frame["message"])


async def measure(
    url: str, sessions: int, offset: int, *, chunks: int, server_pid: int, note: str = ""
) -> list[Row]:
    delays: list[float] = []
    cpu_before = cpu_seconds(server_pid)
    started = time.perf_counter()
    counts = await asyncio.gather(*(one_session(url, offset + i, delays) for i in range(sessions)))
    elapsed = time.perf_counter() - started
    cpu = cpu_seconds(server_pid) - cpu_before
    total = sum(counts)
    ordered = sorted(delays)
    p50 = statistics.median(ordered)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    print(
        f"{sessions:>3} session(s): {total:>7} chunks in {elapsed:6.2f} s = "
        f"{total / elapsed:7.0f} chunks/s   delay p50 {p50:6.2f} ms  p99 {p99:7.2f} ms   "
        f"daphne CPU {cpu * 1e3 / max(total, 1):.3f} ms/chunk   "
        f"dropped {sessions * chunks - total}{note}"
    )
    name = f"{sessions} session{'s' if sessions > 1 else ''}, {chunks} chunks each"
    return [
        row("stream_latency", f"{name}: chunks/s", total / elapsed, unit="/s"),
        row("stream_latency", f"{name}: delay p99", p99, unit="ms"),
        row("stream_latency", f"{name}: daphne CPU/chunk", cpu * 1e6 / max(total, 1), unit="µs"),
        row("stream_latency", f"{name}: dropped", sessions * chunks - total, target="0",
            met=total == sessions * chunks),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 50])
    parser.add_argument(
        "--interval",
        type=float,
        default=0.0,
        help="seconds between the model's chunks (0: as fast as it can, a flood)",
    )
    add_json_option(parser)
    args = parser.parse_args()

    rows: list[Row] = []
    try:
        with (
            scratch_services(),
            tempfile.TemporaryDirectory(prefix="agentsite-stream-") as folder,
            children(Path(folder) / "logs") as procs,
        ):
            scratch = Path(folder)
            llm_port, web_port = free_port(), free_port()
            env = bench_env(scratch, f"http://127.0.0.1:{llm_port}/v1")
            env.update(
                {
                    "DJANGO_SUPERUSER_USERNAME": "bench",
                    "DJANGO_SUPERUSER_PASSWORD": "bench-password-1",
                    # A run opens more chats at once than one user may start turns a minute.
                    "AGENT_TURN_RATE": "100000/min",
                }
            )
            python = sys.executable

            def manage(*command: str) -> str:
                return procs.run(
                    [python, "manage.py", *command],
                    name=f"manage-{command[0]}",
                    cwd=ROOT,
                    env=env,
                )

            manage("migrate", "-v0")
            manage("ensure_login")
            token = manage("drf_create_token", "bench").split()[2]

            llm = procs.start(
                [
                    python,
                    "-m",
                    "tests.llm_server",
                    "--port",
                    str(llm_port),
                    "--stamps",
                    str(args.chunks),
                    "--interval",
                    str(args.interval),
                ],
                name="llm_server",
                cwd=ROOT,
                env=env,
            )
            web = procs.start(
                daphne_argv(web_port),
                name="daphne",
                cwd=ROOT,
                env=env,
            )
            procs.wait_for_port(llm_port, llm)
            procs.wait_for_port(web_port, web)
            url = f"ws://127.0.0.1:{web_port}/ws/chat/{{chat}}/?token={token}"
            pace = (
                f"one every {args.interval * 1000:g} ms" if args.interval else "as fast as possible"
            )
            print(
                f"{args.chunks} chunks per answer, {pace}; one daphne process; "
                "model in its own process"
            )

            async def run() -> None:
                # Imports, connections and first queries make the first answer slow.
                options = {"chunks": args.chunks, "server_pid": web.pid}
                await measure(url, 1, 10_000, **options, note="   (warm-up)")
                for offset, sessions in enumerate(args.sessions):
                    rows.extend(await measure(url, sessions, offset * 1000, **options))

            asyncio.run(run())
    except KeyboardInterrupt:
        print("\ninterrupted; every process the bench started is stopped", file=sys.stderr)
        sys.exit(130)
    pace = f", one every {args.interval * 1000:g} ms" if args.interval else ""
    for figure in rows:
        figure["measure"] = figure["measure"].replace(" each", f" each{pace}")
    write_json(args.json, rows)


if __name__ == "__main__":
    main()
