"""What history length costs a turn: time and database queries of one turn in a session
holding N stored messages, against the same turn in an empty session.

    .venv/bin/python bench/long_session.py [--messages 1000 10000 100000] [--runs 5]

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
from bench._procs import children  # noqa: E402


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
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch, children(Path(scratch) / "logs") as procs:
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
        for size in sizes:
            runs = [one_turn(f"bench:s{size}") for _ in range(args.runs)]
            ms = statistics.median(r[0] for r in runs)
            queries = max(r[1] for r in runs)
            base = base or (ms, queries)
            print(
                f"   {size:>7} messages   {ms:7.1f} ms   {queries:3d} queries"
                f"   ({ms / base[0]:.2f}x the time of an empty session)"
            )


if __name__ == "__main__":
    main()
