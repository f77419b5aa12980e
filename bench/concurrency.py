"""Many web sessions at once, each running a 3-call turn, on one daphne process or several.

    DATABASE_URL=postgres://... .venv/bin/python bench/concurrency.py [--sessions 200]
    DATABASE_URL=postgres://... REDIS_URL=redis://... .venv/bin/python bench/concurrency.py --processes 1 2

Each session opens its own chat over a real WebSocket and sends one message; the scripted
model (its own process) answers every call after `--call-ms` and makes each turn read a file
twice before its streamed reply: three model calls. For each layout it prints the time for
all turns to finish against the ideal (the three calls back to back, as if the site cost
nothing), turns that failed, the p99 delay of the reply's chunks from the model to the
client, the turns per second, and the peak memory of the busiest daphne process. Sessions
are spread over the processes round robin; more than one process needs `REDIS_URL` (the
channel layer they share). Without `DATABASE_URL` it runs on SQLite and says so.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import websockets

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._procs import Children, bench_env, children, daphne_argv, free_port, tail  # noqa: E402

STAMP = re.compile(r"<(\d+)>")
# Why turns failed, and how often: printed under the figures.
FAILURES: collections.Counter[str] = collections.Counter()
CALLS = 3
CHUNKS = 20


async def one_turn(url: str, chat: str, delays: list[float]) -> bool:
    """One session's turn; whether it ended with its reply."""
    try:
        async with websockets.connect(url.format(chat=chat), max_size=None, open_timeout=60) as ws:
            assert json.loads(await ws.recv())["type"] == "history"
            await ws.send(json.dumps({"type": "message", "content": "read it twice"}))
            async with asyncio.timeout(120):
                while True:
                    frame = json.loads(await ws.recv())
                    now = time.time_ns()
                    if frame["type"] == "stream_chunk":
                        delays.extend((now - int(s)) / 1e6 for s in STAMP.findall(frame["content"]))
                    elif frame["type"] == "message" and frame.get("role") == "assistant":
                        return True
                    elif frame["type"] == "error":
                        FAILURES[str(frame.get("message"))[:80]] += 1
                        return False
    except (OSError, TimeoutError, websockets.WebSocketException, AssertionError) as exc:
        FAILURES[f"{type(exc).__name__}: {str(exc)[:60]}"] += 1
        return False


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def measure(urls: list[str], sessions: int, tag: str) -> tuple[float, int, list[float]]:
    delays: list[float] = []
    started = time.perf_counter()
    done = await asyncio.gather(
        *(one_turn(urls[i % len(urls)], f"{tag}{i}", delays) for i in range(sessions))
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
    try:
        with (
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

            print(f"{'daphne':>6} {'done in':>8} {'x ideal':>8} {'turns/s':>8} "
                  f"{'failed':>6} {'p50 chunk':>10} {'p99 chunk':>10} {'peak MiB':>9}")  # fmt: skip
            rates: dict[int, float] = {}
            for count in args.processes:
                bases, webs = start_site(procs, env, count)
                urls = [f"{base}/ws/chat/{{chat}}/?token={token}" for base in bases]
                asyncio.run(measure(urls, min(20, args.sessions), f"warm{count}-"))
                elapsed, failed, delays = asyncio.run(measure(urls, args.sessions, f"p{count}-"))
                ordered = sorted(delays) or [0.0]
                p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
                rates[count] = (args.sessions - failed) / elapsed
                peak = max(peak_rss_mib(web.pid) for web in webs)
                print(
                    f"{count:>6} {elapsed:>7.2f}s {elapsed / ideal:>8.1f} {rates[count]:>8.1f} "
                    f"{failed:>6} {statistics.median(ordered):>8.1f}ms {p99:>8.1f}ms {peak:>9.0f}"
                )
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
    except KeyboardInterrupt:
        print("\ninterrupted; every process the bench started is stopped", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
