"""How late a cron job starts: from its due time to the model receiving its turn's request,
against a bare django-q2 task queued at the same due time, measured in the same run.

    .venv/bin/python bench/cron_delay.py [--jobs 20] [--runs 3] [--json PATH]

One real worker (`manage.py qcluster`, with its cron dispatcher; django-q2 with the ORM
broker unless REDIS_URL is set) on a scratch SQLite database (PostgreSQL with DATABASE_URL
set); the model is the scripted server of the tests, in this process, which notes when
each request naming a job's marker arrives.

Each run makes `--jobs` one-off jobs due a little apart, at uneven fractions of a second
(a dispatcher that looked on a fixed beat would show as a spread), and as many floor tasks:
a thread here sleeps until a due time and calls `async_task("time.time")`, whose result is
the worker's clock when it ran it. The floor is what any start on time pays to reach a
worker through django-q2; the job's figure adds the dispatcher's claim and the turn's start
up to its first model request. p50 and p99 per run; the medians over runs are reported.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._loops import setup_django  # noqa: E402
from bench._procs import children, scratch_services  # noqa: E402
from bench._report import Row, add_json_option, row, write_json  # noqa: E402
from bench.background import FLOOR_FUNC, Arrival, StampedLLM, start_worker  # noqa: E402

TARGET_P99_S = 1.0
# The first job falls due this long after the jobs are made, then one every STEP_S.
LEAD_S = 2.0
STEP_S = 0.6
TIMEOUT = 60.0


def percentile(values: list[float], share: float) -> float:
    """The `share` (0..1) percentile, interpolated between the closest ranks."""
    ordered = sorted(values)
    at = share * (len(ordered) - 1)
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def floor_at(due: datetime, out: list[float]) -> None:
    """Sleep until `due`, queue the bare task, and note how late the worker ran it (s)."""
    from django.db import connections
    from django_q.tasks import async_task, result

    time.sleep(max(0.0, due.timestamp() - time.time()))
    try:
        ran = result(async_task(FLOOR_FUNC), wait=int(TIMEOUT * 1000))
        out.append(float("nan") if ran is None else ran - due.timestamp())
    finally:
        connections.close_all()


def one_run(llm: StampedLLM, owner: Any, jobs: int) -> tuple[list[float], list[float]]:
    """`jobs` one-off jobs and as many floor tasks; how late each started (s)."""
    from django.utils import timezone

    from cron_app.services import create_job

    start = timezone.now() + timedelta(seconds=LEAD_S)
    expected: list[tuple[Arrival, datetime]] = []
    floor_times: list[datetime] = []
    for n in range(jobs):
        # Uneven fractions of a second, so that the dues fall anywhere in a poll interval.
        due = start + timedelta(seconds=n * STEP_S + random.uniform(0, 0.3))
        marker = f"[cron {uuid.uuid4().hex[:12]}]"
        expected.append((llm.expect(marker), due))
        create_job(
            owner=owner, message=f"Answer: ok. {marker}", session="cli:bench", kind="at", at=due
        )
        floor_times.append(due + timedelta(seconds=STEP_S / 2))  # between two jobs' dues
    floors: list[float] = []
    threads = [threading.Thread(target=floor_at, args=(at, floors)) for at in floor_times]
    for thread in threads:
        thread.start()
    late: list[float] = []
    for arrival, due in expected:
        if not arrival.event.wait(TIMEOUT + LEAD_S + jobs * STEP_S):
            raise RuntimeError(f"the job due at {due.isoformat()} made no model request")
        late.append(arrival.wall - due.timestamp())
    for thread in threads:
        thread.join()
    return late, floors


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def report(runs: list[tuple[list[float], list[float]]], jobs: int) -> list[Row]:
    from django.conf import settings

    conf = settings.Q_CLUSTER
    broker = "Redis" if "redis" in conf else f"ORM broker polled every {conf.get('poll', 0.2):g} s"
    p50 = statistics.median(percentile(late, 0.5) for late, _ in runs)
    p99 = statistics.median(percentile(late, 0.99) for late, _ in runs)
    f50 = statistics.median(percentile(floor, 0.5) for _, floor in runs)
    f99 = statistics.median(percentile(floor, 0.99) for _, floor in runs)
    every = [value for late, _ in runs for value in late]
    print(f"Cron start delay: one qcluster of {conf['workers']} workers, {broker}")
    print(f"{jobs} one-off jobs per run, {len(runs)} runs; medians over the runs")
    print(f"{'':<40} {'agentsite':>10} {'floor':>10} {'ratio':>7}")
    for label, ours, floor in (("p50", p50, f50), ("p99", p99, f99)):
        ratio = ours / floor if floor > 0 else float("nan")
        print(
            f"{'due time to the model request, ' + label:<40} {ms(ours):>10} {ms(floor):>10} {ratio:6.1f}x"
        )
    verdict = "met" if p99 <= TARGET_P99_S else "MISSED"
    print(
        f"   every job: min {ms(min(every))}, max {ms(max(every))}; target p99 <= {TARGET_P99_S:g} s, {verdict}"
    )
    print(f"   floor: async_task({FLOOR_FUNC!r}) queued at a due time until the worker runs it")
    return [
        row("cron_delay", "cron job due to its model request, p50, vs bare async_task", p50 * 1000,
            floor=f50 * 1000, unit="ms"),
        row("cron_delay", "cron job due to its model request, p99, vs bare async_task", p99 * 1000,
            floor=f99 * 1000, unit="ms", target=f"<= {TARGET_P99_S * 1000:g} ms",
            met=p99 <= TARGET_P99_S),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20, help="jobs per run (default 20)")
    parser.add_argument("--runs", type=int, default=3, help="runs (default 3)")
    add_json_option(parser)
    args = parser.parse_args()
    if min(args.jobs, args.runs) < 1:
        parser.error("--jobs and --runs take a number above zero")
    os.environ["LOG_LEVEL"] = "WARNING"  # the report alone on the terminal
    llm = StampedLLM()
    llm.start()
    try:
        with (
            scratch_services(),
            tempfile.TemporaryDirectory(prefix="agentsite-cron-") as folder,
            children(Path(folder) / "logs") as procs,
        ):
            # Every job of every run is the bench user's (one-off jobs stay listed), and they
            # start more turns a minute than a person may.
            room = str(args.jobs * args.runs)
            setup_django(
                Path(folder), llm.base_url, AGENT_CRON_MAX_JOBS=room, AGENT_TURN_RATE="10000/min"
            )
            from django.contrib.auth.models import User

            owner = User.objects.create_user("bench")
            start_worker(procs)
            runs = [one_run(llm, owner, args.jobs) for _ in range(args.runs)]
            rows = report(runs, args.jobs)
        write_json(args.json, rows)
    except KeyboardInterrupt:
        print("\ninterrupted; every process the bench started is stopped", file=sys.stderr)
        sys.exit(130)
    finally:
        llm.stop()


if __name__ == "__main__":
    main()
