"""What background work waits for: a spawned sub-agent's first model call, and a cron
job's start against its due time, each against bare django-q2 measured in the same run.

    .venv/bin/python bench/background.py [--samples 15] [--jobs 6] [--json PATH]

One real worker (`manage.py qcluster`, django-q2 with the ORM broker unless REDIS_URL is
set) on a scratch SQLite database (PostgreSQL with DATABASE_URL set); the model is the
scripted server of the tests, in this process, which notes when each request arrives.

1. spawn  from `SessionAgents.spawn` (what the `spawn` tool calls) to the scripted model
          receiving the sub-agent's request, on an idle, warm worker; floor: a bare
          `async_task("time.time")`, from queueing to the worker running it.
2. cron   how long after its due time a one-off cron job's run starts; floor: a bare
          django-q2 ONCE schedule of `time.time` due at the same time.

Medians over samples: a small machine is noisy. It takes about two minutes, most of it
waiting for the cluster's scheduler, which looks at its schedules every 30 s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._loops import setup_django  # noqa: E402
from bench._procs import Children, children, scratch_services  # noqa: E402
from bench._report import Row, add_json_option, row, write_json  # noqa: E402
from tests.llm_server import ScriptedLLM, Step  # noqa: E402

PYTHON = sys.executable
SPAWN_TARGET_S = 1.0
TIMEOUT = 60.0
# The floor's task: a django-q2 worker runs any importable callable by its dotted path, and
# time.time's result is the worker's clock when it ran. bench/ is no package, so a
# function of this file would not be importable in the worker as bench.background.
FLOOR_FUNC = "time.time"
# Where the cron jobs fall due, in seconds from when they are made: the cluster looks at its
# schedules every 30 s, so they span more than one pass and the bench still ends in time.
CRON_FIRST_S = 5.0
CRON_SPREAD_S = 35.0
SCHEDULER_PERIOD_S = 30
# Several poll intervals (0.2 s by default), so that where a sample starts within one is even.
IDLE_PAUSE_S = 1.0


@dataclass
class Arrival:
    """When the request carrying `marker` reached the model: set in the server's thread."""

    marker: str
    event: threading.Event
    perf: float = 0.0
    wall: float = 0.0


class StampedLLM(ScriptedLLM):
    """The scripted model, noting when the first request naming each expected marker
    arrives: taken in the server's thread as the request is read, so this process's own
    waiting does not blur it."""

    def __init__(self) -> None:
        super().__init__()
        self._expected: dict[str, Arrival] = {}
        self._marks_lock = threading.Lock()

    def expect(self, marker: str) -> Arrival:
        arrival = Arrival(marker, threading.Event())
        with self._marks_lock:
            self._expected[marker] = arrival
        return arrival

    def _next_step(self, body: dict[str, Any]) -> Step:
        perf, wall = time.perf_counter(), time.time()
        with self._marks_lock:
            if self._expected:
                # Anywhere in the messages: the sub-agent's prompt may come wrapped.
                text = json.dumps(body.get("messages", []))
                for marker in [m for m in self._expected if m in text]:
                    arrival = self._expected.pop(marker)
                    arrival.perf, arrival.wall = perf, wall
                    arrival.event.set()
        return super()._next_step(body)


@dataclass
class SpawnSample:
    total_ms: float
    # The pieces, from wall clocks (the worker's is another process's).
    queue_ms: float
    enqueue_ms: float
    pickup_ms: float
    turn_ms: float


def median(values: list[float]) -> float:
    return statistics.median(values)


def instrument_store(marks: dict[str, float]) -> None:
    """Note when `store.queue_subagent` and `store.enqueue` return, to split the spawn call
    into its pieces without changing it: `SessionAgents.spawn` looks them up on the module
    at each call."""
    from agent.turn import store

    for name in ("queue_subagent", "enqueue"):
        original = getattr(store, name)

        async def timed(*args: Any, _original: Any = original, _name: str = name, **kw: Any) -> Any:
            result = await _original(*args, **kw)
            marks[_name] = time.time()
            return result

        setattr(store, name, timed)


def wait_for(check: Callable[[], Any], what: str, timeout: float = TIMEOUT) -> Any:
    """Poll `check` until it returns something true; raise after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.02)
    raise RuntimeError(f"timed out after {timeout:g} s waiting for {what}")


def task_done(name: str) -> bool:
    """django-q2 writes a task's row when it has finished, so the worker is free again."""
    from django_q.models import Task

    return Task.objects.filter(name=name).exists()


def floor_pickup_ms() -> float:
    """Queue the bare task and return how long until the worker ran it."""
    from django_q.tasks import async_task, result

    queued = time.time()
    ran = result(async_task(FLOOR_FUNC), wait=int(TIMEOUT * 1000))
    if ran is None:
        raise RuntimeError(f"the worker did not run {FLOOR_FUNC} within {TIMEOUT:g} s")
    return (ran - queued) * 1000


async def spawn_once(
    agents: Any, llm: StampedLLM, marks: dict[str, float] | None, label: str
) -> SpawnSample | None:
    """One spawn, timed to the sub-agent's model request; returns once the sub-agent and
    its announcement turn in the parent session are over, so that the worker is idle.
    `marks` is the dict `instrument_store` fills, for one spawn at a time; None for
    spawns at once, which are not timed."""
    from asgiref.sync import sync_to_async

    from sessions_app.models import Run

    marker = f"[bench {uuid.uuid4().hex[:12]}]"
    arrival = llm.expect(marker)
    if marks is not None:
        marks.clear()
    wall0 = time.time()
    t0 = time.perf_counter()
    run_id = await agents.spawn(f"Answer with one word: done. {marker}", label)
    if not await asyncio.to_thread(arrival.event.wait, TIMEOUT):
        raise RuntimeError(f"the sub-agent {run_id} made no model request within {TIMEOUT:g} s")
    total_ms = (arrival.perf - t0) * 1000
    await sync_to_async(wait_for)(lambda: task_done(f"subagent-{run_id}"), f"sub-agent {run_id}")
    if marks is None:
        return None
    run = await Run.objects.aget(pk=run_id)
    started = run.started.timestamp() if run.started else float("nan")
    return SpawnSample(
        total_ms=total_ms,
        queue_ms=(marks["queue_subagent"] - wall0) * 1000,
        enqueue_ms=(marks["enqueue"] - marks["queue_subagent"]) * 1000,
        pickup_ms=(started - marks["enqueue"]) * 1000,
        turn_ms=(arrival.wall - started) * 1000,
    )


async def measure_spawns(
    llm: StampedLLM, samples: int, workers: int
) -> tuple[list[SpawnSample], list[float]]:
    from asgiref.sync import sync_to_async

    from agent.conf import agent_settings
    from agent.events import discard
    from agent.turn.service import run_recorded
    from agent.turn.subagents import SessionAgents
    from sessions_app.services import get_or_create_session

    marks: dict[str, float] = {}
    instrument_store(marks)
    parent = await sync_to_async(get_or_create_session)(key="cli:bench", owner=None)
    agents = SessionAgents(
        parent, None, discard, model=agent_settings().model, run_recorded=run_recorded
    )
    floor = sync_to_async(floor_pickup_ms)
    # Warm every worker process: each imports the turn's modules and opens its connections
    # on its first sub-agent. At once, so that each lands on a different, idle one.
    await asyncio.gather(
        *(spawn_once(agents, llm, None, f"warm-up {n}") for n in range(workers)),
    )
    await floor()
    spawns: list[SpawnSample] = []
    floors: list[float] = []
    # Interleaved, so that the machine's drifts fall on both alike.
    for index in range(samples):
        await idle_pause()
        sample = await spawn_once(agents, llm, marks, f"bench {index}")
        assert sample is not None
        spawns.append(sample)
        await idle_pause()
        floors.append(await floor())
    return spawns, floors


async def idle_pause() -> None:
    """Wait a random while before a sample. The worker's pusher polls the queue on a
    fixed beat, which restarts when it takes a task; a sample queued straight after the
    previous one finished would land at the same point of that beat every time (just
    after a poll, for a quick task: a whole poll interval to wait). At a random moment,
    each sample waits what a task queued at any time does, on average half an interval."""
    await asyncio.sleep(random.uniform(0, IDLE_PAUSE_S))


def measure_cron(jobs: int) -> tuple[list[float], list[float]]:
    """Make `jobs` one-off cron jobs and as many bare schedules, due in pairs at the same
    staggered times; wait for all to run; return how late each started (s)."""
    from django.contrib.auth.models import User
    from django.utils import timezone
    from django_q.models import Schedule, Task

    from cron_app.models import CronJob
    from cron_app.services import create_job

    owner, _ = User.objects.get_or_create(username="bench")
    now = timezone.now()
    step = CRON_SPREAD_S / max(1, jobs - 1)
    due = [now + timedelta(seconds=CRON_FIRST_S + n * step) for n in range(jobs)]
    names = [f"bench floor {n}" for n in range(jobs)]
    job_ids: list[int] = []
    for name, at in zip(names, due, strict=True):
        # The bare schedule first: a scheduler pass queues what is due in the order the rows
        # were made, so each job goes after its floor, and its figure is not flattered.
        Schedule.objects.create(
            name=name, func=FLOOR_FUNC, schedule_type=Schedule.ONCE, next_run=at, repeats=-1
        )
        job = create_job(
            owner=owner, message=f"cron {name}", session="cli:bench-cron", kind="at", at=at
        )
        job_ids.append(job.pk)
    # The last one may just miss a pass and wait for the next; then its turn runs.
    timeout = CRON_FIRST_S + CRON_SPREAD_S + 2 * SCHEDULER_PERIOD_S

    def all_ran() -> bool:
        jobs_done = not CronJob.objects.filter(pk__in=job_ids, last_run__isnull=True).exists()
        return jobs_done and Task.objects.filter(group__in=names).count() == len(names)

    wait_for(all_ran, "the cron jobs and the bare schedules to run", timeout=timeout)
    runs = {job.pk: job.last_run for job in CronJob.objects.filter(pk__in=job_ids)}
    late: list[float] = []
    for pk, at in zip(job_ids, due, strict=True):
        last_run = runs[pk]
        assert last_run is not None  # all_ran saw to it
        late.append((last_run - at).total_seconds())
    # A task's `started` is when it was queued (django-q2 sets it in async_task); its result,
    # time.time() in the worker, is when it ran, as a cron job's `last_run` is.
    ran = {t.group: t.result for t in Task.objects.filter(group__in=names)}
    floor = [ran[name] - at.timestamp() for name, at in zip(names, due, strict=True)]
    return late, floor


def start_worker(procs: Children) -> None:
    """A real worker, in this process's environment (the scratch install), once it has run
    a task: then the cluster is up."""
    worker = procs.start(
        [PYTHON, "manage.py", "qcluster"], name="qcluster", cwd=ROOT, env=dict(os.environ)
    )
    from django_q.tasks import async_task, result

    if result(async_task(FLOOR_FUNC), wait=int(TIMEOUT * 1000)) is None:
        raise RuntimeError(procs.failure(worker, f"the worker ran no task within {TIMEOUT:g} s"))


def spread(values: list[float], unit: str) -> str:
    return f"min {min(values):.0f}, max {max(values):.0f} {unit}"


def line(label: str, ours: str, floor: str, ratio: float) -> None:
    print(f"{label:<44} {ours:>10} {floor:>10} {ratio:6.1f}x")


def report(
    spawns: list[SpawnSample], floors: list[float], late: list[float], cron_floor: list[float]
) -> list[Row]:
    from django.conf import settings

    conf = settings.Q_CLUSTER
    broker = "Redis" if "redis" in conf else f"ORM broker polled every {conf.get('poll', 0.2):g} s"
    print(
        f"Background work: one qcluster of {conf['workers']} workers, {broker}; "
        "scripted model in this process"
    )
    print(f"{'':<44} {'agentsite':>10} {'floor':>10} {'ratio':>7}")
    totals = [s.total_ms for s in spawns]
    spawn_ms, floor_ms = median(totals), median(floors)
    line(
        "1. spawn to the sub-agent's first model call",
        f"{spawn_ms:.0f} ms",
        f"{floor_ms:.0f} ms",
        spawn_ms / floor_ms,
    )
    verdict = "met" if spawn_ms < SPAWN_TARGET_S * 1000 else "MISSED"
    print(
        f"   median of {len(spawns)} on an idle worker, {spread(totals, 'ms')} "
        f"(target: under {SPAWN_TARGET_S:g} s, {verdict})"
    )
    print(f"   floor: async_task({FLOOR_FUNC!r}) until the worker runs it, {spread(floors, 'ms')}")
    print(
        "   the spawn's pieces (medians): "
        f"queue_subagent {median([s.queue_ms for s in spawns]):.0f} ms, "
        f"enqueue {median([s.enqueue_ms for s in spawns]):.0f} ms,\n"
        "     queued until the worker started the sub-agent's run "
        f"{median([s.pickup_ms for s in spawns]):.0f} ms, "
        f"run started to model request {median([s.turn_ms for s in spawns]):.0f} ms"
    )
    late_med, floor_med = median(late), median(cron_floor)
    line(
        "2. a cron job starts after its due time",
        f"{late_med:.1f} s",
        f"{floor_med:.1f} s",
        late_med / floor_med if floor_med > 0 else float("nan"),
    )
    extra = median([(ours - bare) * 1000 for ours, bare in zip(late, cron_floor, strict=True)])
    print(
        f"   median of {len(late)} one-off jobs, {spread(late, 's')}; "
        f"{extra:.0f} ms after their floor (median)"
    )
    print(
        f"   floor: a bare ONCE schedule of {FLOOR_FUNC} due at the same time, "
        f"{spread(cron_floor, 's')}"
    )
    print(
        f"   bound: django-q2's cluster runs its scheduler every {SCHEDULER_PERIOD_S} s "
        "(django_q/cluster.py, Sentinel.guard:\n"
        "     `counter >= 30`; no setting), so anything scheduled starts "
        f"0-{SCHEDULER_PERIOD_S} s late"
    )
    return [
        row("background", "spawn to the sub-agent's first model call vs bare async_task",
            spawn_ms, floor=floor_ms, unit="ms", target=f"< {SPAWN_TARGET_S * 1000:g} ms",
            met=spawn_ms < SPAWN_TARGET_S * 1000),
        row("background", "cron job starts after its due time vs bare schedule", late_med,
            floor=floor_med, unit="s"),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=15, help="spawns timed (default 15)")
    parser.add_argument("--jobs", type=int, default=6, help="cron jobs timed (default 6)")
    add_json_option(parser)
    args = parser.parse_args()
    if min(args.samples, args.jobs) < 1:
        parser.error("--samples and --jobs take a number above zero")
    # The report alone on the terminal: the agent's INFO logs would interleave with it.
    os.environ["LOG_LEVEL"] = "WARNING"
    llm = StampedLLM()
    llm.start()
    try:
        with (
            scratch_services(),
            tempfile.TemporaryDirectory(prefix="agentsite-background-") as folder,
            children(Path(folder) / "logs") as procs,
        ):
            setup_django(Path(folder), llm.base_url)
            from django.conf import settings

            start_worker(procs)
            spawns, floors = asyncio.run(
                measure_spawns(llm, args.samples, settings.Q_CLUSTER["workers"])
            )
            late, cron_floor = measure_cron(args.jobs)
            rows = report(spawns, floors, late, cron_floor)
        write_json(args.json, rows)
    except KeyboardInterrupt:
        print("\ninterrupted; every process the bench started is stopped", file=sys.stderr)
        sys.exit(130)
    finally:
        llm.stop()


if __name__ == "__main__":
    main()
