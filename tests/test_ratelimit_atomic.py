"""The turn limit holds when many ask for the last places at once: two processes on one
Redis together, or the threads of one process without Redis, start no more turns than the
rate allows."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest
from django.conf import settings

from agent.turn import take_turn_slot
from tests.conftest import ROOT, clean_env

LIMIT = 25
PROCESSES = 2
THREADS = 8
ATTEMPTS = 10  # per thread: far more attempts than places

# Each process takes as fast as its threads can, from a moment agreed beforehand, and prints
# how many turns it was allowed and the waits it was told for the others.
HAMMER = """
import json, sys, threading, time
import django
django.setup()
from agent.turn import take_turn_slot
user, start, threads, attempts = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
# The rate as given: what is tested is the window, not how a person's rate is found.
allowed, waits = [], []
def hammer():
    while time.time() < start:
        time.sleep(0.0005)
    for _ in range(attempts):
        wait = take_turn_slot(user, rate=sys.argv[5])
        (allowed if wait is None else waits).append(wait)
workers = [threading.Thread(target=hammer) for _ in range(threads)]
for worker in workers:
    worker.start()
for worker in workers:
    worker.join()
print(json.dumps({"allowed": len(allowed), "waits": waits}))
"""


def hammer_all(threads: int, attempts: int, take: Callable[[], float | None]) -> list[float | None]:
    """Call `take` from `threads` threads at once; what it answered each time."""
    answers: list[float | None] = []
    start = threading.Barrier(threads)

    def hammer() -> None:
        start.wait()
        for _ in range(attempts):
            answers.append(take())

    workers = [threading.Thread(target=hammer) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return answers


@pytest.mark.skipif(
    not settings.REDIS_URL,
    reason="needs Redis (REDIS_URL): the limit it tests is the one shared through Redis; .ci/run's second pass has it",
)
def test_two_processes_on_one_redis_together_stay_within_the_limit(tmp_path: Path) -> None:
    env = {
        **clean_env(),
        "DJANGO_SETTINGS_MODULE": "agentsite.settings",
        "AGENT_DATA_DIR": str(tmp_path / "data"),
        "REDIS_URL": settings.REDIS_URL,
        "AGENT_TURN_RATE": f"{LIMIT}/min",
    }
    # A user no other test or run counts for.
    user = random.randrange(10**9, 10**12)
    start = time.time() + 4  # time enough for both to import Django
    hammers = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                HAMMER,
                str(user),
                str(start),
                str(THREADS),
                str(ATTEMPTS),
                f"{LIMIT}/min",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(PROCESSES)
    ]
    results = []
    for hammer in hammers:
        out, _ = hammer.communicate(timeout=60)
        assert hammer.returncode == 0
        results.append(json.loads(out))

    assert sum(result["allowed"] for result in results) == LIMIT, results
    waits = [wait for result in results for wait in result["waits"]]
    assert len(waits) == PROCESSES * THREADS * ATTEMPTS - LIMIT
    assert all(0 < wait <= 60 for wait in waits)


def test_threads_of_one_process_without_redis_stay_within_the_limit(settings) -> None:
    settings.REDIS_URL = ""
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    settings.AGENT_TURN_RATE = f"{LIMIT}/min"
    # Threads switch as often as they can, so that a read and its write can be split.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(3):
            user = random.randrange(10**9, 10**12)
            answers = hammer_all(
                THREADS * 4, ATTEMPTS * 2, partial(take_turn_slot, user, rate=f"{LIMIT}/min")
            )
            assert answers.count(None) == LIMIT
            assert all(0 < wait <= 60 for wait in answers if wait is not None)
    finally:
        sys.setswitchinterval(interval)
