"""What starting cold costs: a command-line turn, a fresh server's first message, and a
warm round trip, each against a floor measured in the same run.

    .venv/bin/python bench/cold_start.py [--runs 5] [--servers N] [--only cli|daphne|warm]
                                         [--json PATH]

1. cli: a fresh `manage.py agent -m hello` process, to its exit, against a fresh
   `python -c` process making one streamed request with bare httpx: wall time and peak RSS.
2. daphne: the first WebSocket message of a fresh daphne process against its second; the
   same for tasks queued through the API to a fresh django-q2 worker.
3. warm: milliseconds per model round trip of the turn service, warm, against bare httpx
   and bare litellm loops holding the same conversation.

The model is the scripted server of the tests (tests/llm_server.py) on this machine. Every
figure is a median over runs: a small machine is noisy. The three measurements share their
set-up and their report, so they stay in one script past the usual 400 lines.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import websockets

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._loops import (  # noqa: E402
    Loop,
    agent_loop,
    httpx_loop,
    litellm_loop,
    per_round_trip_ms,
    setup_django,
    start_model,
)
from bench._procs import (  # noqa: E402
    Children,
    bench_env,
    children,
    daphne_argv,
    free_port,
    scratch_services,
)
from bench._report import Row, add_json_option, row, write_json  # noqa: E402

PYTHON = sys.executable
MIB = 1024  # ru_maxrss is in KiB on Linux
WALL_TARGET = 2.0
RSS_TARGET_MIB = 150
FIRST_EXTRA_TARGET_S = 1.0
WARM_TARGET = 3.0
TURN_TIMEOUT = 180

# The floor of a command-line turn: start Python, import an HTTP client, stream one answer.
FLOOR = """\
import json, sys
import httpx

body = {"model": "scripted", "stream": True, "messages": [{"role": "user", "content": "hello"}]}
text = ""
with httpx.stream("POST", sys.argv[1] + "/chat/completions", json=body, timeout=60) as response:
    response.raise_for_status()
    for line in response.iter_lines():
        data = line[5:].strip() if line.startswith("data:") else ""
        if data and data != "[DONE]":
            for choice in json.loads(data)["choices"]:
                text += choice["delta"].get("content") or ""
print(text)
"""

# Ready means a task has gone through the worker and back, so that the timed tasks pay
# none of the cluster's own start-up.
WORKER_PROBE = """\
import sys
from django_q.tasks import async_task, result
sys.exit(0 if result(async_task("os.getpid"), wait=120_000) else "the worker never answered")
"""


def median(values: list[float]) -> float:
    return statistics.median(values)


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


@dataclass
class Site:
    """A scratch install with a login, and the scripted model in its own process."""

    procs: Children
    scratch: Path
    env: dict[str, str]
    api_base: str
    token: str = ""

    @classmethod
    def start(cls, procs: Children, scratch: Path) -> Site:
        llm_port = free_port()
        api_base = f"http://127.0.0.1:{llm_port}/v1"
        env = bench_env(scratch, api_base)
        env.update(
            {
                "DJANGO_SUPERUSER_USERNAME": "bench",
                "DJANGO_SUPERUSER_PASSWORD": "bench-password-1",
                # Every part's turns count against one user's limit; the bench is no abuse.
                "AGENT_TURN_RATE": "100000/min",
                # One worker process: with two, the second task may land on the other,
                # just as cold, and there would be no warm one to compare with.
                "AGENT_WORKERS": "1",
            }
        )
        llm = procs.start(
            [PYTHON, "-m", "tests.llm_server", "--port", str(llm_port)],
            name="llm_server",
            cwd=ROOT,
            env=env,
        )
        site = cls(procs, scratch, env, api_base)
        site.manage("migrate", "-v0")
        site.manage("ensure_login")
        site.token = site.manage("drf_create_token", "bench").split()[2]
        procs.wait_for_port(llm_port, llm)
        return site

    def manage(self, *command: str, name: str = "") -> str:
        return self.procs.run(
            [PYTHON, "manage.py", *command],
            name=name or f"manage-{command[0]}",
            cwd=ROOT,
            env=self.env,
        )

    def daphne(self, name: str) -> tuple[subprocess.Popen[bytes], int, float]:
        """Start a fresh daphne; return it, its port and the seconds until it listened."""
        port = free_port()
        started = time.perf_counter()
        proc = self.procs.start(
            daphne_argv(port),
            name=name,
            cwd=ROOT,
            env=self.env,
        )
        self.procs.wait_for_port(port, proc)
        return proc, port, time.perf_counter() - started


# -- 1. the command line ---------------------------------------------------------------


def one_process(
    site: Site, command: list[str], name: str, answer: str | None
) -> tuple[float, float]:
    """Run `command` once in a fresh process, which must print `answer`: its wall time (s)
    and peak RSS (MiB)."""
    out = site.scratch / f"{name}.out"
    with out.open("wb") as sink:
        started = time.perf_counter()
        proc = site.procs.start(command, name=name, stdout=sink, cwd=ROOT, env=site.env)
        code, usage = site.procs.wait4(proc)
        wall = time.perf_counter() - started
    site.procs.stop(proc)
    if code:
        raise RuntimeError(site.procs.failure(proc, f"{' '.join(command[:4])} exited with {code}"))
    if answer is not None and answer not in out.read_text(errors="replace"):
        raise RuntimeError(f"{' '.join(command[:4])} did not answer: {out.read_text()[:200]!r}")
    return wall, usage.ru_maxrss / MIB


FLOOR_LABEL = "floor: python -c, httpx, 1 request"
CLI_LABEL = "manage.py agent -m hello"


def part_cli(site: Site, runs: int) -> list[Row]:
    # label: (log name, command, what it must print: the scripted model echoes)
    kinds: dict[str, tuple[str, list[str], str | None]] = {
        FLOOR_LABEL: ("floor", [PYTHON, "-c", FLOOR, site.api_base], "hello"),
        CLI_LABEL: ("cli", [PYTHON, "manage.py", "agent", "-m", "hello"], "hello"),
    }
    nanobot = shutil.which("nanobot")
    if nanobot:
        # With its own configuration: the bench cannot tell it where the scripted model is.
        kinds["nanobot agent -m hello"] = ("nanobot", [nanobot, "agent", "-m", "hello"], None)
    print(f"\n1. Command line: a fresh process, to its exit (median of {runs})")
    figures: dict[str, list[tuple[float, float]]] = {label: [] for label in kinds}
    failed: dict[str, str] = {}
    # One unmeasured run of each first: a cold disk cache is not what this measures.
    for index in range(runs + 1):
        # Interleaved, so that the machine's drifts fall on every kind alike.
        for label, (name, command, answer) in kinds.items():
            if label in failed:
                continue
            try:
                figure = one_process(site, command, f"{name}-{index}", answer)
            except RuntimeError as exc:
                if name != "nanobot":
                    raise
                failed[label] = str(exc).splitlines()[0]
                continue
            if index:
                figures[label].append(figure)
    floor_wall = median([wall for wall, _ in figures[FLOOR_LABEL]])
    floor_rss = median([rss for _, rss in figures[FLOOR_LABEL]])
    print(f"   {'':<38} {'wall':>9} {'peak RSS':>10}   {'wall/floor':>10} {'RSS/floor':>9}")
    for label, values in figures.items():
        if not values:
            continue
        wall = median([w for w, _ in values])
        rss = median([r for _, r in values])
        print(
            f"   {label:<38} {wall:7.2f} s {rss:6.0f} MiB   "
            f"{wall / floor_wall:9.1f}x {rss / floor_rss:8.1f}x"
        )
    cli_wall = median([w for w, _ in figures[CLI_LABEL]])
    cli_ratio = cli_wall / floor_wall
    cli_rss = median([r for _, r in figures[CLI_LABEL]])
    print(
        f"   target: wall at most {WALL_TARGET:g}x the floor ({verdict(cli_ratio <= WALL_TARGET)}), "
        f"peak RSS at most {RSS_TARGET_MIB} MiB ({verdict(cli_rss <= RSS_TARGET_MIB)})"
    )
    if not nanobot:
        print("   (no nanobot on PATH: not timed)")
    for label, reason in failed.items():
        print(f"   ({label} failed, not timed: {reason})")
    rows = [
        row("cold_start", f"`{CLI_LABEL}`, wall vs python -c httpx", cli_wall, floor=floor_wall,
            unit="s", target=f"ratio ≤ {WALL_TARGET:g}", met=cli_ratio <= WALL_TARGET),
        row("cold_start", f"`{CLI_LABEL}`, peak RSS vs python -c httpx", cli_rss,
            floor=floor_rss, unit="MiB", target=f"≤ {RSS_TARGET_MIB} MiB",
            met=cli_rss <= RSS_TARGET_MIB),
    ]  # fmt: skip
    for label, values in figures.items():
        if label.startswith("nanobot") and values:
            wall, rss = median([w for w, _ in values]), median([r for _, r in values])
            rows.append(row("cold_start", f"`{label}`, wall (for comparison)", wall,
                            floor=floor_wall, unit="s"))  # fmt: skip
            rows.append(row("cold_start", f"`{label}`, peak RSS (for comparison)", rss,
                            floor=floor_rss, unit="MiB"))  # fmt: skip
    return rows


# -- 2. a fresh server ------------------------------------------------------------------


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


# -- 3. warm ----------------------------------------------------------------------------


def part_warm(procs: Children, scratch: Path, runs: int, turns: int, tools: int) -> list[Row]:
    base_url = start_model(procs, tools)
    setup_django(scratch, base_url)
    loops: dict[str, Loop] = {
        "bare httpx loop": httpx_loop,
        "bare litellm loop": litellm_loop,
        "agent turn service": agent_loop,
    }

    async def measure() -> dict[str, list[float]]:
        for loop in loops.values():
            await loop(base_url, 1)
        figures: dict[str, list[float]] = {name: [] for name in loops}
        for _ in range(runs):
            for name, loop in loops.items():
                per_call, _, _ = await per_round_trip_ms(loop, base_url, turns, tools)
                figures[name].append(per_call)
        return figures

    figures = asyncio.run(measure())
    print(
        f"\n3. Warm: ms per model round trip, one process after a warm-up, {turns} turns x "
        f"{tools} tool calls a run, scripted model in its own process (median of {runs})"
    )
    ms = {name: median(values) for name, values in figures.items()}
    for name, value in ms.items():
        print(f"   {name:<38} {value:7.2f} ms")
    agent = ms["agent turn service"]
    ratio = agent / ms["bare httpx loop"]
    print(
        f"   agent / httpx   {ratio:6.2f}x   "
        f"(target: at most {WARM_TARGET:g}x, {verdict(ratio <= WARM_TARGET)})"
    )
    print(f"   agent / litellm {agent / ms['bare litellm loop']:6.2f}x")
    return [
        row("cold_start", "warm round trip, turn service vs bare httpx", agent,
            floor=ms["bare httpx loop"], unit="ms", target=f"ratio ≤ {WARM_TARGET:g}",
            met=ratio <= WARM_TARGET),
    ]  # fmt: skip


HEADER = """\
Cold start. Each figure is a median over runs; each ratio is against a floor measured in
this same run. The model is tests/llm_server.py on this machine (echo, or scripted tool
calls in part 3): its own time is in every figure, the floors' included.
  1. cli     wall time and peak RSS of a fresh `manage.py agent -m hello`, against a fresh
             `python -c` that streams one answer with bare httpx
  2. daphne  send-to-answer time of a fresh daphne's first WebSocket message against its
             second; and of a fresh django-q2 worker's first API task against its second
  3. warm    ms per model round trip of the warm turn service, against bare httpx and
             bare litellm loops holding the same conversation"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per figure (default 5)")
    parser.add_argument(
        "--servers", type=int, help="fresh daphne and worker processes in part 2 (default: --runs)"
    )
    parser.add_argument("--only", choices=["cli", "daphne", "warm"], help="run one part")
    parser.add_argument("--turns", type=int, default=5, help="turns per warm run (default 5)")
    parser.add_argument("--tools", type=int, default=4, help="tool calls per warm turn (default 4)")
    add_json_option(parser)
    args = parser.parse_args()
    if min(args.runs, args.turns, args.tools) < 1 or (
        args.servers is not None and args.servers < 1
    ):
        parser.error("--runs, --servers, --turns and --tools take a number above zero")
    # Each figure as soon as it is known, also into a pipe: a run takes minutes.
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    print(HEADER)
    rows: list[Row] = []
    try:
        with (
            scratch_services(),
            tempfile.TemporaryDirectory(prefix="agentsite-cold-") as folder,
            children(Path(folder) / "logs") as procs,
        ):
            scratch = Path(folder)
            if args.only in (None, "cli", "daphne"):
                site = Site.start(procs, scratch / "site")
                if args.only in (None, "cli"):
                    rows += part_cli(site, args.runs)
                if args.only in (None, "daphne"):
                    rows += part_daphne(site, args.servers or args.runs)
            if args.only in (None, "warm"):
                rows += part_warm(procs, scratch / "warm", args.runs, args.turns, args.tools)
    except KeyboardInterrupt:
        print("\ninterrupted; every process the bench started is stopped", file=sys.stderr)
        sys.exit(130)
    write_json(args.json, rows)


if __name__ == "__main__":
    main()
