"""Many web sessions at once, each running a 3-call turn, on one daphne process or several.

    DATABASE_URL=postgres://... .venv/bin/python bench/concurrency.py [--sessions 200]
    DATABASE_URL=postgres://... REDIS_URL=redis://... .venv/bin/python bench/concurrency.py --processes 1 2
        [--watchers auto|on|off] [--grace 30] [--json PATH]

Each session opens its own chat over a real WebSocket and sends one message; the scripted
model (its own process) answers every call after `--call-ms` and makes each turn read a file
twice before its streamed reply: three model calls. For each layout it prints the time for
all turns to finish against the ideal (the three calls back to back, as if the site cost
nothing) and against the floor (the same conversations on bare httpx straight to the model,
measured first in the same run: what the machine allows with no site), turns that failed, the p99 delay of the reply's chunks from the model to the
client, the turns per second, the peak memory of the busiest daphne process and the web
processes' CPU per turn. Sessions
are spread over the processes round robin; more than one process needs `REDIS_URL` (the
channel layer they share). Without `DATABASE_URL` it runs on SQLite and says so. With
`DATABASE_URL` and `REDIS_URL` it makes a PostgreSQL database of its own next to the one
named, drops it at the end, and uses a Redis database of its own (`_procs.scratch_services`).

No event lost in the channel layer: with watchers (by default on layouts of two processes or
more), a second pass gives each session a second socket on another process, which must
receive the turn's tool results and final `message` through the layer within `--grace`
seconds (30) of the sender; "lost" counts those that did not. Tool results travel only
through the layer (a socket's own look at the run record, which could stand in for a lost
final message, has no tool cards), so a loss cannot hide. The lag of the final message
behind the sender's is printed too. The pass is not timed, so the layouts' figures stay
comparable.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import websockets

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._loops import httpx_loop  # noqa: E402
from bench._procs import (  # noqa: E402
    Children,
    bench_env,
    children,
    cpu_seconds,
    daphne_argv,
    free_port,
    scratch_services,
    tail,
)
from bench._report import Row, add_json_option, row, write_json  # noqa: E402

STAMP = re.compile(r"<(\d+)>")
# Why turns failed, and how often: printed under the figures.
FAILURES: collections.Counter[str] = collections.Counter()
CALLS = 3
CHUNKS = 20
IDEAL_TARGET = 1.2
P99_TARGET_MS = 20.0
SCALE_TARGET = 1.8


class Watch:
    """What the watchers of one pass saw: when each got its turn's final message, against
    when the sender got it."""

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self.lost = 0
        # Of the lost, those still behind on the turn's earlier events at the deadline: the
        # layer was slow to deliver rather than missing one event.
        self.behind = 0
        self.lags: list[float] = []


async def one_turn(
    url: str, chat: str, delays: list[float], watcher: str = "", watch: Watch | None = None
) -> bool:
    """One session's turn; whether it ended with its reply. With a `watcher` URL, a second
    socket on the same chat there, which must get the reply too (counted in `watch`)."""
    try:
        async with contextlib.AsyncExitStack() as stack:
            ws = await stack.enter_async_context(
                websockets.connect(url.format(chat=chat), max_size=None, open_timeout=60)
            )
            assert json.loads(await ws.recv())["type"] == "history"
            watching: asyncio.Task[float] | None = None
            if watch is not None:
                # Opened once the sender's socket has made the session, and in the group
                # before the turn starts: it has every event of the turn coming to it.
                other = await stack.enter_async_context(
                    websockets.connect(watcher.format(chat=chat), max_size=None, open_timeout=60)
                )
                assert json.loads(await other.recv())["type"] == "history"
                seen: list[str] = []
                watching = asyncio.create_task(final_message(other, seen))
                stack.callback(watching.cancel)
            await ws.send(json.dumps({"type": "message", "content": "read it twice"}))
            async with asyncio.timeout(120):
                while True:
                    frame = json.loads(await ws.recv())
                    now = time.time_ns()
                    if frame["type"] == "stream_chunk":
                        delays.extend((now - int(s)) / 1e6 for s in STAMP.findall(frame["content"]))
                    elif frame["type"] == "message" and frame.get("role") == "assistant":
                        break
                    elif frame["type"] == "error":
                        FAILURES[str(frame.get("message"))[:80]] += 1
                        return False
            if watch is not None and watching is not None:
                ended = time.perf_counter()
                done, _ = await asyncio.wait([watching], timeout=watch.grace)
                if done and not watching.exception():
                    watch.lags.append(max(0.0, watching.result() - ended) * 1000)
                else:
                    watch.lost += 1
                    watch.behind += "thinking_finished" not in seen
            return True
    except (OSError, TimeoutError, websockets.WebSocketException, AssertionError) as exc:
        FAILURES[f"{type(exc).__name__}: {str(exc)[:60]}"] += 1
        return False


TOOL_RESULTS = 2  # the scripted turn reads a file twice


async def final_message(ws: Any, seen: list[str]) -> float:
    """When the turn's final message reached a socket that did not start the turn, once its
    tool results have too; `seen` gets the type of every frame."""
    arrived = 0.0
    while not (arrived and seen.count("tool_result") >= TOOL_RESULTS):
        frame = json.loads(await ws.recv())
        seen.append(frame["type"])
        if frame["type"] == "message" and frame.get("role") == "assistant" and not arrived:
            arrived = time.perf_counter()
    return arrived


async def bare_floor(base_url: str, sessions: int) -> float:
    """Seconds for `sessions` tool conversations at once on bare httpx against the same
    model: what this machine's cores, shared with the model, allow with no site at all."""
    started = time.perf_counter()
    await asyncio.gather(*(httpx_loop(base_url, 1) for _ in range(sessions)))
    return time.perf_counter() - started


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def measure(
    urls: list[str], sessions: int, tag: str, watch: Watch | None = None
) -> tuple[float, int, list[float]]:
    """Every session's turn at once, round robin over the processes; with `watch`, each
    session's watcher on the next process."""
    delays: list[float] = []
    started = time.perf_counter()
    done = await asyncio.gather(
        *(
            one_turn(urls[i % len(urls)], f"{tag}{i}", delays, urls[(i + 1) % len(urls)], watch)
            for i in range(sessions)
        )
    )
    return time.perf_counter() - started, done.count(False), delays


def start_site(
    procs: Children, env: dict[str, str], count: int
) -> tuple[list[str], list[subprocess.Popen[bytes]]]:
    ports = [free_port() for _ in range(count)]
    webs = [
        procs.start(daphne_argv(port), name=f"daphne-{port}", cwd=ROOT, env=env) for port in ports
    ]
    for port, web in zip(ports, webs, strict=True):
        procs.wait_for_port(port, web)
    return [f"ws://127.0.0.1:{port}" for port in ports], webs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--call-ms", type=float, default=100.0)
    parser.add_argument("--processes", type=int, nargs="+", default=[1])
    parser.add_argument(
        "--watchers",
        choices=["auto", "on", "off"],
        default="auto",
        help="a pass with a watcher socket per session on another process (auto: with 2+)",
    )
    parser.add_argument(
        "--grace",
        type=float,
        default=30.0,
        help="seconds after the sender a watcher may take to get the turn's events (default 30)",
    )
    add_json_option(parser)
    args = parser.parse_args()
    if max(args.processes) > 1 and not os.environ.get("REDIS_URL"):
        parser.error("more than one process needs REDIS_URL (the channel layer they share)")

    database = (
        "PostgreSQL" if os.environ.get("DATABASE_URL", "").startswith("postgres") else "SQLite"
    )
    ideal = CALLS * args.call_ms / 1000
    print(
        f"{args.sessions} sessions at once, each a turn of {CALLS} model calls of "
        f"{args.call_ms:g} ms (ideal {ideal:.2f} s); {database}"
    )
    redis = bool(os.environ.get("REDIS_URL"))
    rows: list[Row] = []
    try:
        with (
            scratch_services(),
            tempfile.TemporaryDirectory(prefix="agentsite-conc-") as folder,
            children(Path(folder) / "logs") as procs,
        ):
            scratch = Path(folder)
            llm_port = free_port()
            env = bench_env(scratch, f"http://127.0.0.1:{llm_port}/v1")
            if os.environ.get("REDIS_URL"):
                env["REDIS_URL"] = os.environ["REDIS_URL"]
            env.update(
                {
                    "DJANGO_SUPERUSER_USERNAME": "bench",
                    "DJANGO_SUPERUSER_PASSWORD": "bench-password-1",
                    "AGENT_TURN_RATE": "1000000/min",
                }
            )
            python = sys.executable

            def manage(*command: str) -> str:
                return procs.run([python, "manage.py", *command], name="manage", cwd=ROOT, env=env)

            manage("migrate", "-v0")
            manage("ensure_login")
            token = manage("drf_create_token", "-r", "bench").split()[2]
            (scratch / "workspace").mkdir(exist_ok=True)
            (scratch / "workspace" / "hello.txt").write_text("Hello World\n")
            model = [python, "-m", "tests.llm_server", "--port", str(llm_port)]
            model += ["--tool-loop", str(CALLS - 1), "--delay", str(args.call_ms / 1000)]
            model += ["--stamps", str(CHUNKS)]
            llm = procs.start(model, name="llm_server", cwd=ROOT, env=env)
            procs.wait_for_port(llm_port, llm)
            floor = asyncio.run(bare_floor(f"http://127.0.0.1:{llm_port}/v1", args.sessions))
            print(
                f"floor: the same {args.sessions} conversations on bare httpx, straight to the "
                f"model, no site: {floor:.2f} s ({floor / ideal:.1f} x ideal)"
            )

            print(f"{'daphne':>6} {'done in':>8} {'x ideal':>8} {'turns/s':>8} "
                  f"{'failed':>6} {'p50 chunk':>10} {'p99 chunk':>10} {'peak MiB':>9} "
                  f"{'lost':>5} {'CPU/turn':>9}")  # fmt: skip
            rates: dict[int, float] = {}
            for count in args.processes:
                bases, webs = start_site(procs, env, count)
                urls = [f"{base}/ws/chat/{{chat}}/?token={token}" for base in bases]
                asyncio.run(measure(urls, min(20, args.sessions), f"warm{count}-"))
                cpu_before = sum(cpu_seconds(web.pid) for web in webs)
                elapsed, failed, delays = asyncio.run(measure(urls, args.sessions, f"p{count}-"))
                cpu_per_turn = (sum(cpu_seconds(web.pid) for web in webs) - cpu_before) * 1000
                cpu_per_turn /= args.sessions
                ordered = sorted(delays) or [0.0]
                p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
                rates[count] = (args.sessions - failed) / elapsed
                peak = max(peak_rss_mib(web.pid) for web in webs)
                watch = None
                if args.watchers == "on" or (args.watchers == "auto" and count > 1):
                    watch = Watch(args.grace)
                    _, watch_failed, _ = asyncio.run(
                        measure(urls, args.sessions, f"w{count}-", watch)
                    )
                    failed += watch_failed
                print(
                    f"{count:>6} {elapsed:>7.2f}s {elapsed / ideal:>8.1f} {rates[count]:>8.1f} "
                    f"{failed:>6} {statistics.median(ordered):>8.1f}ms {p99:>8.1f}ms {peak:>9.0f} "
                    f"{'-' if watch is None else watch.lost:>5} {cpu_per_turn:>7.1f}ms"
                )
                layout = (
                    f"{args.sessions} sessions, {count} daphne{'s' if count > 1 else ''}, "
                    f"{database}{' + Redis' if redis else ''}"
                )
                rows += [
                    row("concurrency", f"{layout}: all done vs ideal", elapsed, floor=ideal,
                        unit="s", target=f"ratio ≤ {IDEAL_TARGET:g}",
                        met=elapsed <= IDEAL_TARGET * ideal),
                    row("concurrency", f"{layout}: all done vs bare httpx", elapsed,
                        floor=floor, unit="s"),
                    row("concurrency", f"{layout}: failed turns", failed, target="0",
                        met=failed == 0),
                    row("concurrency", f"{layout}: reply chunk delay p99", p99, unit="ms",
                        target=f"< {P99_TARGET_MS:g} ms", met=p99 < P99_TARGET_MS),
                ]  # fmt: skip
                if watch is not None:
                    lags = sorted(watch.lags) or [0.0]
                    where = "another process" if count > 1 else "the same process"
                    print(
                        f"       watchers: a second socket per session on {where}; "
                        f"{watch.lost} of {args.sessions} missed a tool result or the final message "
                        f"within {args.grace:g} s of the sender ({watch.behind} of them still "
                        f"behind on the turn's earlier events);\n       final message's lag "
                        f"behind the sender's: p50 "
                        f"{statistics.median(lags):.0f} ms, "
                        f"p99 {lags[min(len(lags) - 1, int(len(lags) * 0.99))]:.0f} ms"
                    )
                    rows.append(
                        row("concurrency", f"{layout}: watchers that lost an event",
                            watch.lost, target="0", met=watch.lost == 0)
                    )  # fmt: skip
                if failed:  # what the server said about it
                    for log in sorted(procs.logs.glob("daphne-*.log")):
                        print(f"  {log.name}:{tail(log, 12)}")
                for web in webs:
                    procs.stop(web)
            for reason, count in FAILURES.most_common(5):
                print(f"  failed {count}x: {reason}")
            if 1 in rates and len(rates) > 1:
                for count, rate in rates.items():
                    if count > 1:
                        print(f"throughput with {count} processes: {rate / rates[1]:.2f}x one")
                        rows.append(
                            row("concurrency", f"turns/s, {count} daphnes vs 1", rate,
                                floor=rates[1], unit="/s", target=f"ratio ≥ {SCALE_TARGET:g}",
                                met=rate >= SCALE_TARGET * rates[1])
                        )  # fmt: skip
    except KeyboardInterrupt:
        print("\ninterrupted; every process the bench started is stopped", file=sys.stderr)
        sys.exit(130)
    write_json(args.json, rows)


if __name__ == "__main__":
    main()
