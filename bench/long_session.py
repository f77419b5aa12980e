"""What history length costs a turn: time and database queries of one turn in a session
holding N stored messages, against the same turn in an empty session.

    .venv/bin/python bench/long_session.py [--messages 1000 10000 100000] [--runs 5] [--json PATH]

The model is the scripted server of the tests on this machine; the database is a scratch
SQLite (PostgreSQL with DATABASE_URL set). Medians over runs: a small machine is noisy.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._loops import setup_django, start_model  # noqa: E402
from bench._procs import children, scratch_services  # noqa: E402
from bench._report import add_json_option, row, write_json  # noqa: E402

# Flat: the largest session's turn within this of the empty one's time (a noisy machine),
# and no more queries than a session with any history at all makes.
TIME_TARGET = 1.5


def fill(key: str, count: int) -> None:
    from sessions_app.models import Message, Session

    session = Session.objects.create(key=key, channel="bench", chat_id=key.split(":")[1])
    for start in range(0, count, 5_000):
        Message.objects.bulk_create(
            Message(session=session, role="user" if n % 2 == 0 else "assistant", content=f"m{n}")
            for n in range(start, min(count, start + 5_000))
        )


def one_turn(key: str) -> tuple[float, int]:
    from asgiref.sync import async_to_sync
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from agent.turn.service import run_turn

    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        assert async_to_sync(run_turn)(key, "hello", channel="bench").success
        elapsed = time.perf_counter() - started
    return elapsed * 1000, len(queries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--runs", type=int, default=5)
    add_json_option(parser)
    args = parser.parse_args()
    with (
        scratch_services(),
        tempfile.TemporaryDirectory() as scratch,
        children(Path(scratch) / "logs") as procs,
    ):
        base_url = start_model(procs, tools=0)
        setup_django(Path(scratch), base_url)
        from django.conf import settings

        # The default window: a turn reads that much history however much is stored.
        settings.AGENT_MEMORY_WINDOW = 50
        one_turn("bench:warm")
        sizes = [0, *args.messages]
        for size in sizes:
            fill(f"bench:s{size}", size)
        print(f"One turn by stored history (median of {args.runs}; scripted model, no tools)")
        base: tuple[float, int] | None = None
        figures: dict[int, tuple[float, int]] = {}
        for size in sizes:
            runs = [one_turn(f"bench:s{size}") for _ in range(args.runs)]
            ms = statistics.median(r[0] for r in runs)
            queries = max(r[1] for r in runs)
            base = base or (ms, queries)
            figures[size] = (ms, queries)
            print(
                f"   {size:>7} messages   {ms:7.1f} ms   {queries:3d} queries"
                f"   ({ms / base[0]:.2f}x the time of an empty session)"
            )
        largest = sizes[-1]
        (ms, queries), (empty_ms, empty_queries) = figures[largest], figures[0]
        # Any history at all costs a query or so more than none: the reference for queries.
        least = figures[sizes[1]][1] if len(sizes) > 1 else empty_queries
        rows = [
            row("long_session", f"turn time at {largest:,} messages vs empty", ms,
                floor=empty_ms, unit="ms", target=f"ratio ≤ {TIME_TARGET:g}",
                met=ms <= TIME_TARGET * empty_ms),
            row("long_session", f"queries per turn at {largest:,} messages vs empty", queries,
                floor=empty_queries, target=f"= at {sizes[1]:,} messages" if len(sizes) > 1 else "",
                met=queries <= least),
        ]  # fmt: skip
    write_json(args.json, rows)


if __name__ == "__main__":
    main()
