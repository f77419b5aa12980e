"""What the OpenAI-compatible door costs: per turn against the task API and the model alone,
and in CPU per streamed chunk against the WebSocket door and a bare client.

    .venv/bin/python bench/openai_door.py [--turns 30] [--chunks 2000] [--runs 5] [--json PATH]

The scripted model (a process of its own) answers each message with a short reply, or
"stamps N" with N time-stamped chunks. One daphne serves the site. Measured, in rounds in
which the paths take turns (the machine is noisy; medians are shown):

  per turn, wall time of `--turns` turns one after another, each in a session of its own:
    (a)  `POST /v1/chat/completions` through the door, the `openai` way a client sends it
    (a') the same with `"stream": true`, read to `data: [DONE]`
    (b)  `POST /api/tasks` (wait mode), the task API's turn
    (c)  the scripted model alone: the same request straight to it (the floor)
  CPU per streamed chunk, as bench/chunk_cpu.py measures it (a short and a long reply; the
  difference of their CPU over the difference of their chunks):
    (d)  the daphne process serving the door's stream
    (e)  a daphne process serving the WebSocket chat the same turn (the reference)
    (f)  bare httpx reading the model's stream in a process of its own (the floor)
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from bench._procs import Children, children, daphne_argv, free_port, scratch_services  # noqa: E402
from bench._report import Row, add_json_option, row, write_json  # noqa: E402
from bench.chunk_cpu import Product, fit, process_cpu, run_client, start_site  # noqa: E402

PYTHON = sys.executable
STAMP = re.compile(r"<(\d+)>")
TIMEOUT = 120
# Targets: the door's own work per turn beside the task API's, and per chunk beside the
# WebSocket's, which does the same work for the same turn.
TURN_TARGET = 1.25
CHUNK_TARGET = 1.5


class Door:
    """The site on one daphne, reached as an OpenAI client and as a task API client."""

    def __init__(self, procs: Children, env: dict[str, str], token: str) -> None:
        port = free_port()
        self.proc = procs.start(daphne_argv(port), name="daphne-door", cwd=ROOT, env=env)
        procs.wait_for_port(port, self.proc)
        self.http = httpx.Client(
            base_url=f"http://127.0.0.1:{port}",
            timeout=TIMEOUT,
            headers={"Authorization": f"Bearer {token}"},
        )
        self.task_auth = {"Authorization": f"Token {token}"}

    def completion(self, prompt: str) -> str:
        body = {"model": "agentsite", "messages": [{"role": "user", "content": prompt}]}
        answer = self.http.post("/v1/chat/completions", json=body)
        answer.raise_for_status()
        return str(answer.json()["choices"][0]["message"]["content"])

    def streamed(self, prompt: str) -> str:
        body = {
            "model": "agentsite",
            "messages": [{"role": "user", "content": prompt}],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        parts = []
        with self.http.stream("POST", "/v1/chat/completions", json=body) as answer:
            answer.raise_for_status()
            for line in answer.iter_lines():
                if line == "data: [DONE]":
                    return "".join(parts)
                if line.startswith("data: "):
                    for choice in json.loads(line[6:])["choices"]:
                        parts.append(choice["delta"].get("content") or "")
        raise RuntimeError("the stream ended without data: [DONE]")

    def task(self, prompt: str) -> str:
        answer = self.http.post("/api/tasks", json={"prompt": prompt}, headers=self.task_auth)
        answer.raise_for_status()
        return str(answer.json()["text"])

    def stream_cpu(self, chunks: int) -> float:
        """daphne's CPU for one streamed turn of `chunks` chunks."""
        before = process_cpu(self.proc.pid)
        text = self.streamed(f"stamps {chunks}")
        cpu = process_cpu(self.proc.pid) - before
        if len(STAMP.findall(text)) != chunks:
            raise RuntimeError(f"asked for {chunks} chunks, received {len(STAMP.findall(text))}")
        return cpu


def model_alone(base_url: str) -> Callable[[str], str]:
    client = httpx.Client(base_url=base_url, timeout=TIMEOUT)

    def one(prompt: str) -> str:
        body = {"model": "scripted", "messages": [{"role": "user", "content": prompt}]}
        answer = client.post("/chat/completions", json=body)
        answer.raise_for_status()
        return str(answer.json()["choices"][0]["message"]["content"])

    return one


def ms_per_turn(one: Callable[[str], str], turns: int) -> float:
    started = time.perf_counter()
    for number in range(turns):
        if not one(f"hello {number}"):
            raise RuntimeError("an empty answer")
    return (time.perf_counter() - started) / turns * 1e3


def measure_all(turns: int, chunks: int, runs: int) -> list[Row]:
    short = max(10, chunks // 10)
    with (
        scratch_services(),
        tempfile.TemporaryDirectory(prefix="agentsite-openai-door-") as folder,
        children(Path(folder) / "logs") as procs,
    ):
        model_port = free_port()
        model = procs.start(
            [PYTHON, str(ROOT / "bench" / "chunk_cpu.py"), "--serve-model", str(model_port)],
            name="model",
            cwd=ROOT,
        )
        procs.wait_for_port(model_port, model)
        base_url = f"http://127.0.0.1:{model_port}/v1"
        env, token = start_site(procs, Path(folder), base_url)
        door = Door(procs, env, token)
        socket = Product(procs, env, token, "daphne-socket")
        paths: dict[str, Callable[[str], str]] = {
            "(a) door": door.completion,
            "(a') door, streamed": door.streamed,
            "(b) POST /api/tasks": door.task,
            "(c) the model alone": model_alone(base_url),
        }
        for one in paths.values():
            ms_per_turn(one, 2)  # imports, connections, first queries
        door.stream_cpu(short)
        socket.measure([short])
        per_turn: dict[str, list[float]] = {label: [] for label in paths}
        per_chunk: dict[str, list[tuple[float, float]]] = {
            "(d) door stream": [],
            "(e) WebSocket chat": [],
            "(f) bare httpx (floor)": [],
        }
        for _ in range(runs):
            for label, one in paths.items():
                per_turn[label].append(ms_per_turn(one, turns))
            cpu = {size: door.stream_cpu(size) for size in (short, chunks)}
            per_chunk["(d) door stream"].append(fit(cpu, short, chunks))
            per_chunk["(e) WebSocket chat"].append(
                fit(socket.measure([short, chunks]), short, chunks)
            )
            bare = run_client(procs, "httpx", base_url, [short, chunks])
            per_chunk["(f) bare httpx (floor)"].append(fit(bare, short, chunks))
        door.http.close()
    return report(turns, chunks, short, runs, per_turn, per_chunk)


def report(
    turns: int,
    chunks: int,
    short: int,
    runs: int,
    per_turn: dict[str, list[float]],
    per_chunk: dict[str, list[tuple[float, float]]],
) -> list[Row]:
    ms = {label: statistics.median(values) for label, values in per_turn.items()}
    chunk = {
        label: (statistics.median(p for p, _ in values), statistics.median(f for _, f in values))
        for label, values in per_chunk.items()
    }
    print(f"Wall time per turn, {turns} turns one after another; medians of {runs} rounds")
    tasks, alone = ms["(b) POST /api/tasks"], ms["(c) the model alone"]
    print(f"   {'':<24} {'ms/turn':>8} {'x tasks':>8} {'x model':>8}")
    for label, value in ms.items():
        print(f"   {label:<24} {value:8.2f} {value / tasks:8.2f} {value / alone:8.2f}")
    print(f"CPU per streamed chunk: replies of {chunks} and {short} chunks; medians of {runs}")
    socket, bare = chunk["(e) WebSocket chat"][0], chunk["(f) bare httpx (floor)"][0]
    print(f"   {'':<24} {'µs/chunk':>9} {'fixed ms':>9} {'x socket':>9} {'x httpx':>8}")
    for label, (value, fixed) in chunk.items():
        print(f"   {label:<24} {value:9.1f} {fixed:9.1f} {value / socket:9.2f} {value / bare:8.2f}")
    door, streamed = ms["(a) door"], ms["(a') door, streamed"]
    door_chunk = chunk["(d) door stream"][0]
    return [
        row(
            "openai_door",
            "turn through /v1/chat/completions vs POST /api/tasks",
            door,
            floor=tasks,
            unit="ms",
            target=f"≤ {TURN_TARGET}x",
            met=door <= TURN_TARGET * tasks,
        ),
        row(
            "openai_door",
            "streamed turn through the door vs POST /api/tasks",
            streamed,
            floor=tasks,
            unit="ms",
            target=f"≤ {TURN_TARGET}x",
            met=streamed <= TURN_TARGET * tasks,
        ),
        row(
            "openai_door", "turn through the door vs the model alone", door, floor=alone, unit="ms"
        ),
        row(
            "openai_door",
            "CPU per chunk, door stream vs WebSocket chat",
            door_chunk,
            floor=socket,
            unit="µs",
            target=f"≤ {CHUNK_TARGET}x",
            met=door_chunk <= CHUNK_TARGET * socket,
        ),
        row(
            "openai_door",
            "CPU per chunk, door stream vs bare httpx",
            door_chunk,
            floor=bare,
            unit="µs",
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=30, help="turns per path and round")
    parser.add_argument("--chunks", type=int, default=2000, help="chunks of the long reply")
    parser.add_argument("--runs", type=int, default=5, help="rounds (default 5)")
    add_json_option(parser)
    args = parser.parse_args()
    if args.turns < 1 or args.chunks < 20 or args.runs < 1:
        parser.error("--turns takes 1 or more, --chunks 20 or more, --runs 1 or more")
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    try:
        rows = measure_all(args.turns, args.chunks, args.runs)
    except KeyboardInterrupt:
        print("\ninterrupted; every process the bench started is stopped", file=sys.stderr)
        sys.exit(130)
    write_json(args.json, rows)


if __name__ == "__main__":
    main()
