"""Part 2 of bench/cold_start.py: the first WebSocket message of a fresh daphne process
against its second, and the same for tasks queued through the API to a fresh django-q2
worker.
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import websockets

from bench._cold_start_site import PYTHON, ROOT, Site, median, verdict
from bench._report import Row, row

FIRST_EXTRA_TARGET_S = 1.0
TURN_TIMEOUT = 180

# Ready means a task has gone through the worker and back, so that the timed tasks pay
# none of the cluster's own start-up.
WORKER_PROBE = """\
import sys
from django_q.tasks import async_task, result
sys.exit(0 if result(async_task("os.getpid"), wait=120_000) else "the worker never answered")
"""


async def ws_message(url: str) -> tuple[float, float]:
    """Open a chat, send one message; seconds to the history frame, then to the answer."""
    async with asyncio.timeout(TURN_TIMEOUT):
        started = time.perf_counter()
        async with websockets.connect(url, max_size=None) as ws:
            history = json.loads(await ws.recv())
            if history.get("type") != "history":
                raise RuntimeError(f"expected the history frame first, got {history!r}")
            connected = time.perf_counter()
            await ws.send(json.dumps({"type": "message", "content": "hello"}))
            while True:
                frame = json.loads(await ws.recv())
                if frame.get("type") == "message" and frame.get("role") == "assistant":
                    return connected - started, time.perf_counter() - connected
                if frame.get("type") == "error":
                    raise RuntimeError(f"the chat answered with an error: {frame!r}")


def api_task(base: str, token: str) -> float | None:
    """Queue a task through the API and follow it to its end: seconds, or None when the
    API ran it in the web process rather than queueing it."""
    headers = {"Authorization": f"Token {token}"}
    started = time.perf_counter()
    with httpx.Client(base_url=base, headers=headers, timeout=TURN_TIMEOUT) as client:
        response = client.post("/api/tasks", json={"prompt": "hello", "wait": False})
        response.raise_for_status()
        task = response.json()
        if response.status_code != 202 or task["status"] != "queued":
            return None
        deadline = started + TURN_TIMEOUT
        while task["status"] in ("queued", "running"):
            if time.perf_counter() > deadline:
                raise RuntimeError(
                    f"task {task['id']} still {task['status']} after {TURN_TIMEOUT} s"
                )
            # Fine enough: the ORM broker itself polls every 0.2 s.
            time.sleep(0.02)
            task = client.get(f"/api/tasks/{task['id']}").json()
        if task["status"] != "succeeded":
            raise RuntimeError(f"task {task['id']} {task['status']}: {task.get('error')}")
    return time.perf_counter() - started


def first_vs_second(
    label: str, firsts: list[float], seconds: list[float], *, judged: bool = True
) -> Row:
    first, second = median(firsts), median(seconds)
    # The median of the differences, not the difference of the medians: each pair shares
    # its process, and with it the machine's mood at the time.
    extra = median([a - b for a, b in zip(firsts, seconds, strict=True)])
    note = f"   ({verdict(extra <= FIRST_EXTRA_TARGET_S)})" if judged else ""
    print(f"   {label:<38} {first:7.2f} s {second:7.2f} s {extra:+8.2f} s{note}")
    return row(
        "cold_start",
        f"{label}, first vs second",
        first,
        floor=second,
        unit="s",
        target=f"first ≤ second + {FIRST_EXTRA_TARGET_S:g} s" if judged else "",
        met=extra <= FIRST_EXTRA_TARGET_S if judged else None,
    )


def part_daphne(site: Site, servers: int) -> list[Row]:
    print(
        f"\n2. A fresh server's first message against its second "
        f"(median of {servers} fresh processes; target: first at most "
        f"{FIRST_EXTRA_TARGET_S:g} s more than second)"
    )
    print(f"   {'':<38} {'first':>9} {'second':>9} {'first-second':>10}")
    ready: list[float] = []
    connects: tuple[list[float], list[float]] = ([], [])
    messages: tuple[list[float], list[float]] = ([], [])
    for index in range(servers):
        proc, port, listening = site.daphne(f"daphne-{index}")
        ready.append(listening)
        url = f"ws://127.0.0.1:{port}/ws/chat/{{chat}}/?token={site.token}"
        # Two chats: the second message pays for nothing the first chat set up.
        for order, chat in enumerate(("first", "second")):
            connect, message = asyncio.run(ws_message(url.format(chat=f"cold{index}-{chat}")))
            connects[order].append(connect)
            messages[order].append(message)
        site.procs.stop(proc)
    rows = [first_vs_second("daphne: WebSocket message", *messages)]
    first_vs_second("daphne: WebSocket connect + history", *connects, judged=False)
    print(f"   (daphne listened {median(ready):.2f} s after it was started)")

    return rows + worker(site, servers)


def worker(site: Site, servers: int) -> list[Row]:
    web, port, _ = site.daphne("daphne-api")
    base = f"http://127.0.0.1:{port}"
    # The web side warm, so that only the worker is cold: one task run in the web process.
    httpx.post(
        f"{base}/api/tasks",
        json={"prompt": "hello"},
        headers={"Authorization": f"Token {site.token}"},
        timeout=TURN_TIMEOUT,
    ).raise_for_status()
    firsts: list[float] = []
    seconds: list[float] = []
    for index in range(servers):
        cluster = site.procs.start(
            [PYTHON, "manage.py", "qcluster"], name=f"qcluster-{index}", cwd=ROOT, env=site.env
        )
        site.procs.run(
            [PYTHON, "manage.py", "shell", "-c", WORKER_PROBE],
            name=f"probe-{index}",
            cwd=ROOT,
            env=site.env,
            timeout=150,
        )
        first = api_task(base, site.token)
        second = None if first is None else api_task(base, site.token)
        site.procs.stop(cluster)
        if first is None:
            print(
                "   (POST /api/tasks with wait false ran the task in the web process: no turn "
                "runs in the worker, so there is no worker to time)"
            )
            break
        if second is None:
            raise RuntimeError("the API queued one task to the worker, then ran one itself")
        firsts.append(first)
        seconds.append(second)
    site.procs.stop(web)
    if not firsts:
        return []
    rows = [first_vs_second("worker: API task, queued to done", firsts, seconds)]
    print(
        "   (one django-q2 worker process, ready: a probe task went through it first; "
        "daphne warm; the ORM broker polls every 0.2 s)"
    )
    return rows
