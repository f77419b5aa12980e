"""How fast streamed tokens reach a browser-side client, through one daphne process.

The scripted model (its own process) streams CHUNKS pieces per answer, each carrying the
time it was sent. WebSocket clients (this process) open chats on a daphne process running
the site, send one message each, and record when every chunk arrives. Prints chunks per
second, the p50/p99 delay from the model emitting a chunk to the client receiving it, the
daphne process's CPU time per chunk the model wrote, and how many chunks never arrived, for
1 and for 50 concurrent sessions, each with one tab and with two (the second tab only
watches the reply stream), and what the second tab costs as ratios.

    .venv/bin/python bench/stream_latency.py [--chunks 2000] [--sessions 1 50] [--tabs 1 2]
                                             [--runs 3] [--json PATH]
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


async def one_tab(
    url: str, chat: str, delays: list[float], *, send: bool, ready: asyncio.Event
) -> int:
    """One socket on `chat`: it sends the message if `send`, else waits for the other tab to;
    either way it records every chunk's delay until the reply lands."""
    received = 0
    async with websockets.connect(url.format(chat=chat), max_size=None) as ws:
        history = json.loads(await ws.recv())
        assert history["type"] == "history", history
        if send:
            await ready.wait()
            await ws.send(json.dumps({"type": "message", "content": "stream please"}))
        else:
            ready.set()
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


async def one_session(url: str, index: int, delays: list[float], tabs: int) -> int:
    """The chunks every tab of one session received: the first tab sends, once the others
    are open (a tab that opens mid-reply is `tests/test_live_stream.py`'s)."""
    ready = asyncio.Event()
    if tabs == 1:
        ready.set()
    watchers = [
        one_tab(url, f"bench{index}", delays, send=False, ready=ready) for _ in range(1, tabs)
    ]
    counts = await asyncio.gather(
        one_tab(url, f"bench{index}", delays, send=True, ready=ready), *watchers
    )
    return sum(counts)


async def measure(
    url: str,
    sessions: int,
    offset: int,
    *,
    chunks: int,
    server_pid: int,
    tabs: int = 1,
    note: str = "",
) -> dict[str, float]:
    """One run of `sessions` sessions with `tabs` sockets each: its figures, printed."""
    delays: list[float] = []
    cpu_before = cpu_seconds(server_pid)
    started = time.perf_counter()
    counts = await asyncio.gather(
        *(one_session(url, offset + i, delays, tabs) for i in range(sessions))
    )
    elapsed = time.perf_counter() - started
    cpu = cpu_seconds(server_pid) - cpu_before
    total = sum(counts)
    ordered = sorted(delays)
    figures = {
        "rate": total / elapsed,
        "p50": statistics.median(ordered),
        "p99": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
        # CPU per chunk the model wrote: what a second tab adds shows in it.
        "cpu": cpu * 1e3 / max(sessions * chunks, 1),
        "dropped": sessions * chunks * tabs - total,
    }
    print(
        f"{sessions:>3} session(s) x {tabs} tab(s): {total:>7} chunks in {elapsed:6.2f} s = "
        f"{figures['rate']:7.0f} chunks/s   delay p50 {figures['p50']:6.2f} ms  "
        f"p99 {figures['p99']:7.2f} ms   daphne CPU {figures['cpu']:.3f} ms/model chunk   "
        f"dropped {figures['dropped']:.0f}{note}"
    )
    return figures


def medians(runs: list[dict[str, float]]) -> dict[str, float]:
    """Each figure's median over the runs; what was dropped, summed."""
    middle = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    middle["dropped"] = sum(run["dropped"] for run in runs)
    return middle


def figure_rows(sessions: int, tabs: int, chunks: int, figures: dict[str, float]) -> list[Row]:
    tabs_named = f" x {tabs} tabs" if tabs > 1 else ""
    name = f"{sessions} session{'s' if sessions > 1 else ''}{tabs_named}, {chunks} chunks each"
    return [
        row("stream_latency", f"{name}: chunks/s", figures["rate"], unit="/s"),
        row("stream_latency", f"{name}: delay p99", figures["p99"], unit="ms"),
        row("stream_latency", f"{name}: daphne CPU/chunk", figures["cpu"] * 1e3, unit="µs"),
        row("stream_latency", f"{name}: dropped", figures["dropped"], target="0",
            met=figures["dropped"] == 0),
    ]  # fmt: skip


def compare_tabs(sessions: int, figures: dict[int, dict[str, float]]) -> list[Row]:
    """What the watching tabs cost: each layout's figures over one tab's, as the floor."""
    one = figures[1]
    compared: list[Row] = []
    for tabs, these in figures.items():
        if tabs == 1:
            continue
        ratios = {k: these[k] / one[k] for k in ("p50", "p99", "cpu")}
        print(
            f"    {tabs} tabs / 1 tab at {sessions} session(s), medians: delay p50 "
            f"{ratios['p50']:.2f}x  p99 {ratios['p99']:.2f}x  "
            f"daphne CPU per model chunk {ratios['cpu']:.2f}x"
        )
        name = f"{sessions} session{'s' if sessions > 1 else ''} x {tabs} tabs (floor: 1 tab)"
        compared += [
            row("stream_latency", f"{name}: delay p50", these["p50"], floor=one["p50"],
                unit="ms", target="ratio <= 1.5", met=ratios["p50"] <= 1.5),
            row("stream_latency", f"{name}: daphne CPU/chunk", these["cpu"] * 1e3,
                floor=one["cpu"] * 1e3, unit="µs", target="ratio <= 1.5",
                met=ratios["cpu"] <= 1.5),
        ]  # fmt: skip
    return compared


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 50])
    parser.add_argument(
        "--tabs",
        type=int,
        nargs="+",
        default=[1, 2],
        help="sockets open on each session: one sends, the others watch it stream",
    )
    parser.add_argument(
        "--interval",
        type=float,
        default=0.0,
        help="seconds between the model's chunks (0: as fast as it can, a flood)",
    )
    parser.add_argument(
        "--runs", type=int, default=3, help="runs of each layout; figures are their medians"
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
                await measure(url, 1, 100_000, **options, note="   (warm-up)")
                offset = 0
                for sessions in args.sessions:
                    runs: dict[int, list[dict[str, float]]] = {tabs: [] for tabs in args.tabs}
                    # The layouts take turns, so that a machine busier for a while weighs
                    # on each alike.
                    for _ in range(args.runs):
                        for tabs in args.tabs:
                            offset += 1000
                            measured = await measure(url, sessions, offset, **options, tabs=tabs)
                            runs[tabs].append(measured)
                    figures = {tabs: medians(measured) for tabs, measured in runs.items()}
                    for tabs, middle in figures.items():
                        rows.extend(figure_rows(sessions, tabs, args.chunks, middle))
                    if 1 in figures:
                        rows.extend(compare_tabs(sessions, figures))

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
