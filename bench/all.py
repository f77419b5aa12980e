"""Every benchmark in one command, and one table of their headline figures.

    .venv/bin/python bench/all.py [--full] [--only NAME ...] [--set NAME="ARGS"] [--logs DIR]

Each bench runs as a process of its own with `--json`, so that one that fails costs only
its own rows; its whole output goes to a log (kept with --logs). By default each runs at a
modest size, the whole in a few minutes; `--full` runs each at its own defaults, and
`--set` gives one bench the arguments it is to run with instead, e.g.
`--set concurrency="--sessions 400"`.

Every bench runs on a scratch SQLite install, whatever the environment says, except the
PostgreSQL + Redis layouts of bench/concurrency.py, which run when DATABASE_URL and
REDIS_URL are both set (on a database and a Redis database of their own).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._procs import tail  # noqa: E402
from bench._report import Row, row  # noqa: E402

TIMEOUT = 1200
SERVICES = ("DATABASE_URL", "REDIS_URL")


@dataclass
class Bench:
    name: str  # what --only and --set call it
    script: str
    modest: list[str]  # arguments for the default, modest run; --full drops them
    services: bool = False  # runs on DATABASE_URL and REDIS_URL, and only with both


BENCHES = [
    Bench("cold_start", "cold_start.py", ["--runs", "3"]),
    Bench("loop_overhead", "loop_overhead.py", ["--turns", "10", "--tools", "5"]),
    Bench("clean_text", "clean_text.py", ["--runs", "3"]),
    Bench("parallel_tools", "parallel_tools.py", ["--runs", "3"]),
    Bench("chunk_cpu", "chunk_cpu.py", ["--chunks", "2000", "--runs", "3"]),
    Bench("openai_door", "openai_door.py", ["--turns", "10", "--chunks", "1000", "--runs", "3"]),
    Bench(
        "model_client",
        "model_client.py",
        ["--chunks", "2000", "--round-trips", "100", "--runs", "3"],
    ),
    Bench("stream_latency", "stream_latency.py", ["--chunks", "2000", "--sessions", "1", "50"]),
    Bench(
        "stream_paced",
        "stream_latency.py",
        ["--chunks", "300", "--interval", "0.01", "--sessions", "1", "50"],
    ),
    Bench("long_session", "long_session.py", ["--messages", "1000", "100000", "--runs", "3"]),
    Bench("background", "background.py", ["--samples", "5", "--jobs", "2"]),
    Bench("cron_delay", "cron_delay.py", ["--jobs", "20", "--runs", "2"]),
    Bench("mcp_calls", "mcp_calls.py", ["--calls", "100", "--rounds", "3"]),
    Bench("exec_overhead", "exec_overhead.py", ["--calls", "20", "--rounds", "3"]),
    Bench(
        "concurrency", "concurrency.py", ["--sessions", "200", "--processes", "1", "--runs", "1"]
    ),
    Bench(
        "concurrency_pg",
        "concurrency.py",
        ["--sessions", "200", "--processes", "1", "2", "--runs", "1"],
        services=True,
    ),
]
# --full: what each runs with when no modest size is asked for, where its own defaults
# would not make the layout the name promises.
FULL = {
    "stream_paced": ["--chunks", "500", "--interval", "0.01"],
    "concurrency_pg": ["--processes", "1", "2"],
}


def run_one(bench: Bench, argv: list[str], logs: Path) -> tuple[list[Row], float]:
    """Run one bench to its end; its rows, or one row saying why there are none."""
    env = dict(os.environ)
    if bench.services:
        if not all(env.get(key) for key in SERVICES):
            return [row(bench.name, "skipped: set DATABASE_URL and REDIS_URL", None)], 0.0
    else:
        for key in SERVICES:
            env.pop(key, None)
    out = logs / f"{bench.name}.json"
    log = logs / f"{bench.name}.log"
    command = [sys.executable, str(ROOT / "bench" / bench.script), *argv, "--json", str(out)]
    started = time.perf_counter()
    with log.open("wb") as sink:
        sink.write(f"$ {shlex.join(command)}\n".encode())
        sink.flush()
        proc = subprocess.Popen(
            command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=sink, stderr=sink
        )
        code = finish(proc)
    elapsed = time.perf_counter() - started
    if code == 0 and out.exists():
        return json.loads(out.read_text()), elapsed
    why = f"timed out after {TIMEOUT} s" if code is None else f"failed with exit status {code}"
    print(f"  {bench.name} {why}; the end of its log:{tail(log, 8)}", file=sys.stderr)
    return [row(bench.name, f"{why}: see {log}", None)], elapsed


def finish(proc: subprocess.Popen[bytes]) -> int | None:
    """Wait for a bench; its exit status, or None when it ran out of time. A bench stops
    its own children when interrupted or terminated, so it is asked to stop, never killed
    (subprocess.run would kill it on Ctrl-C, leaving its children behind)."""
    try:
        return proc.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.terminate()
        proc.wait()
        return None
    except KeyboardInterrupt:
        # The terminal's Ctrl-C reached it too; a SIGTERM to this process did not.
        proc.send_signal(signal.SIGINT)
        proc.wait()
        raise


def number(value: float | None, unit: str = "") -> str:
    if value is None:
        return ""
    if unit == "µs" or abs(value) >= 100 or value.is_integer():
        text = f"{value:.0f}"
    elif abs(value) >= 10:
        text = f"{value:.1f}"
    else:
        text = f"{value:.2f}"
    return f"{text} {unit}".strip()


def table(rows: list[Row]) -> str:
    header = ("benchmark", "figure", "ours", "floor / reference", "ratio", "target", "met?")
    lines = [header]
    for r in rows:
        met = "" if r["met"] is None else ("yes" if r["met"] else "NO")
        ratio = "" if r["ratio"] is None else f"{r['ratio']:.2f}x"
        lines.append(
            (
                r["bench"],
                r["measure"],
                number(r["ours"], r["unit"]),
                number(r["floor"], r["unit"]),
                ratio,
                r["target"],
                met,
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    right = {2, 3, 4}  # numbers
    text = []
    for index, line in enumerate(lines):
        cells = [
            cell.rjust(width) if column in right else cell.ljust(width)
            for column, (cell, width) in enumerate(zip(line, widths, strict=True))
        ]
        text.append("  ".join(cells).rstrip())
        if index == 0:
            text.append("  ".join("-" * width for width in widths))
    return "\n".join(text)


def main() -> None:
    names = [bench.name for bench in BENCHES]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="each bench at its own defaults")
    parser.add_argument("--only", nargs="+", choices=names, metavar="NAME", help=", ".join(names))
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar='NAME="ARGS"',
        help="the arguments one bench runs with (repeatable)",
    )
    parser.add_argument("--logs", type=Path, help="keep every bench's output in this folder")
    args = parser.parse_args()
    chosen: dict[str, list[str]] = {}
    for setting in args.set:
        name, _, value = setting.partition("=")
        if name not in names:
            parser.error(f"--set {setting!r}: no bench called {name!r} (one of {names})")
        chosen[name] = shlex.split(value)

    with tempfile.TemporaryDirectory(prefix="agentsite-all-") as scratch:
        logs = args.logs or Path(scratch)
        logs.mkdir(parents=True, exist_ok=True)
        rows: list[Row] = []
        selected = [b for b in BENCHES if not args.only or b.name in args.only]
        started = time.perf_counter()
        # As the benches do: SIGTERM ends the run as Ctrl-C does, table and all.
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        try:
            for index, bench in enumerate(selected, 1):
                argv = chosen.get(bench.name)
                if argv is None:
                    argv = FULL.get(bench.name, []) if args.full else bench.modest
                print(
                    f"[{index}/{len(selected)}] {bench.name} {shlex.join(argv)}",
                    end="",
                    file=sys.stderr,
                    flush=True,
                )
                found, elapsed = run_one(bench, argv, logs)
                print(f"  ({elapsed:.0f} s)", file=sys.stderr)
                rows += found
        except KeyboardInterrupt:
            # The bench running now has stopped its own children on the same Ctrl-C.
            print("\ninterrupted: the figures so far", file=sys.stderr)
        print(table(rows))
        missed = sum(r["met"] is False for r in rows)
        judged = sum(r["met"] is not None for r in rows)
        print(
            f"\n{judged - missed} of {judged} targets met; "
            f"{time.perf_counter() - started:.0f} s in all"
            + (f"; logs in {logs}" if args.logs else "")
        )


if __name__ == "__main__":
    main()
