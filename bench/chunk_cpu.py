"""Framework CPU per streamed chunk, from the model's socket to the client's, against
litellm alone and bare HTTP clients reading the same stream.

    .venv/bin/python bench/chunk_cpu.py [--chunks 2000] [--runs 5] [--json PATH]

The scripted model (a process of its own) streams one reply of as many time-stamped chunks
as the message asks for. Measured, in each round:

  (a)  the product as users run it: a daphne process serving the site, one WebSocket client
       (this process) receiving every token frame; the CPU of the daphne process (all its
       threads) during the turn. An `openai/` model takes the product's default path.
  (a') the same with AGENT_LLM_BACKEND=litellm, where the product goes through litellm.
  (b)  litellm alone, in a process of its own: `litellm.acompletion(stream=True)`, every
       chunk iterated; that process's CPU.
  (c)  bare httpx reading the SSE lines and parsing each as JSON: the floor.
  (d)  the same on bare aiohttp, the HTTP client of the product's lean path.

Each path streams a short reply (a tenth of the chunks) and a long one: the difference of
their CPU over the difference of their chunks is the cost per chunk, free of what a turn or
a request costs once, which is shown apart ("fixed"). Medians over rounds, in which the
paths take turns, since the machine is noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._procs import (  # noqa: E402
    Children,
    bench_env,
    children,
    daphne_argv,
    free_port,
    scratch_services,
)
from bench._report import Row, add_json_option, row, write_json  # noqa: E402

MODEL = "openai/scripted"
STAMP = re.compile(r"<(\d+)>")
ASK = re.compile(r"stamps (\d+)")
PYTHON = sys.executable
TURN_TIMEOUT = 120
CLIENTS = ("litellm", "httpx", "aiohttp")


# -- the model: stamps, as many as asked for ------------------------------------------------


def serve_model(port: int) -> None:
    from tests.llm_server import ScriptedLLM, Step

    class Sized(ScriptedLLM):
        """Answers "stamps N" with N time-stamped chunks, so that one server serves every
        size each path asks for."""

        def _next_step(self, body: dict[str, Any]) -> Step:
            for message in reversed(body.get("messages", [])):
                if message.get("role") == "user":
                    found = ASK.search(str(message.get("content")))
                    if found:
                        return Step("stamps", chunks=int(found[1]))
                    break
            return super()._next_step(body)

    Sized(port=port)._server.serve_forever()


# -- (b) (c) (d): a bare client, in a process of its own -------------------------------------


async def litellm_stream(base_url: str, chunks: int) -> int:
    import litellm

    stream = await litellm.acompletion(
        model=MODEL,
        api_base=base_url,
        api_key="bench",
        messages=[{"role": "user", "content": f"stamps {chunks}"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    received = 0
    async for chunk in stream:
        if chunk.choices:
            received += len(STAMP.findall(chunk.choices[0].delta.content or ""))
    return received


def _sse_body(chunks: int) -> dict[str, Any]:
    return {
        "model": "scripted",
        "messages": [{"role": "user", "content": f"stamps {chunks}"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def _count(data: str) -> int:
    chunk = json.loads(data)
    if not chunk.get("choices"):
        return 0
    return len(STAMP.findall(chunk["choices"][0].get("delta", {}).get("content") or ""))


async def httpx_stream(client: Any, chunks: int) -> int:
    received = 0
    async with client.stream("POST", "/chat/completions", json=_sse_body(chunks)) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if line.startswith("data:") and line[5:].strip() != "[DONE]":
                received += _count(line[5:])
    return received


async def aiohttp_stream(client: Any, base_url: str, chunks: int) -> int:
    received = 0
    async with client.post(f"{base_url}/chat/completions", json=_sse_body(chunks)) as response:
        response.raise_for_status()
        async for raw in response.content:
            line = raw.decode().strip()
            if line.startswith("data:") and line[5:].strip() != "[DONE]":
                received += _count(line[5:])
    return received


async def client_main(kind: str, base_url: str, sizes: list[int]) -> dict[str, float]:
    """Stream each size once after a warm-up; CPU seconds of this process for each."""
    headers = {"Authorization": "Bearer bench"}
    if kind == "litellm":
        # Its price table from the package, not fetched from the network at import.
        os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

        async def one(chunks: int) -> int:
            return await litellm_stream(base_url, chunks)

        return await _timed(one, sizes)
    if kind == "httpx":
        import httpx

        async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=60) as hx:
            return await _timed(lambda chunks: httpx_stream(hx, chunks), sizes)
    import aiohttp

    async with aiohttp.ClientSession(headers=headers) as session:
        return await _timed(lambda chunks: aiohttp_stream(session, base_url, chunks), sizes)


async def _timed(one: Callable[[int], Any], sizes: list[int]) -> dict[str, float]:
    await one(min(sizes))  # imports, the connection, litellm's first-call set-up
    cpu: dict[str, float] = {}
    for size in sizes:
        before = time.process_time()
        received = await one(size)
        cpu[str(size)] = time.process_time() - before
        if received != size:
            raise RuntimeError(f"asked for {size} chunks, received {received}")
    return cpu


def run_client(procs: Children, kind: str, base_url: str, sizes: list[int]) -> dict[int, float]:
    command = [PYTHON, __file__, "--client", kind, "--base-url", base_url]
    command += ["--sizes", *map(str, sizes)]
    out = procs.run(command, name=f"client-{kind}", cwd=ROOT, timeout=TURN_TIMEOUT)
    return {int(size): cpu for size, cpu in json.loads(out.splitlines()[-1]).items()}


# -- (a): the product ------------------------------------------------------------------------


def process_cpu(pid: int) -> float:
    """CPU seconds of every thread of `pid`, living or ended, to the nanosecond: the
    process's CPU clock (Linux numbers it from the pid), else /proc's clock ticks."""
    try:
        return time.clock_gettime((~pid << 3) | 2)  # MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)
    except OSError:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Product:
    """A daphne process serving the site, and a chat on it per turn."""

    def __init__(self, procs: Children, env: dict[str, str], token: str, name: str) -> None:
        port = free_port()
        self.proc = procs.start(daphne_argv(port), name=name, cwd=ROOT, env=env)
        procs.wait_for_port(port, self.proc)
        self.url = f"ws://127.0.0.1:{port}/ws/chat/{{chat}}/?token={token}"
        self.chats = 0

    async def turn(self, chunks: int) -> float:
        """One turn in a fresh chat (no history to build on); daphne's CPU for it."""
        import websockets

        self.chats += 1
        url = self.url.format(chat=f"cpu{self.chats}")
        async with (
            asyncio.timeout(TURN_TIMEOUT),
            websockets.connect(url, max_size=None) as ws,
        ):
            assert json.loads(await ws.recv())["type"] == "history"
            before = process_cpu(self.proc.pid)
            await ws.send(json.dumps({"type": "message", "content": f"stamps {chunks}"}))
            received = 0
            while True:
                frame = json.loads(await ws.recv())
                if frame["type"] == "stream_chunk":
                    received += len(STAMP.findall(frame["content"]))
                elif frame["type"] == "message" and frame.get("role") == "assistant":
                    break
                elif frame["type"] == "error":
                    raise RuntimeError(f"the turn failed: {frame}")
            cpu = process_cpu(self.proc.pid) - before
        if received != chunks:
            raise RuntimeError(f"asked for {chunks} chunks, the client received {received}")
        return cpu

    def measure(self, sizes: list[int]) -> dict[int, float]:
        async def all_sizes() -> dict[int, float]:
            return {size: await self.turn(size) for size in sizes}

        return asyncio.run(all_sizes())


def start_site(procs: Children, scratch: Path, base_url: str) -> tuple[dict[str, str], str]:
    env = bench_env(scratch, base_url)
    env.update(
        {
            "DJANGO_SUPERUSER_USERNAME": "bench",
            "DJANGO_SUPERUSER_PASSWORD": "bench-password-1",
            "AGENT_TURN_RATE": "100000/min",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }
    )
    for command in (["migrate", "-v0"], ["ensure_login"]):
        procs.run([PYTHON, "manage.py", *command], name="manage", cwd=ROOT, env=env)
    out = procs.run(
        [PYTHON, "manage.py", "drf_create_token", "bench"], name="manage", cwd=ROOT, env=env
    )
    return env, out.split()[2]


# -- the report ------------------------------------------------------------------------------


def fit(cpu: dict[int, float], short: int, long: int) -> tuple[float, float]:
    """µs per chunk and fixed ms, from the CPU of a short and a long reply."""
    per_chunk = (cpu[long] - cpu[short]) / (long - short)
    return per_chunk * 1e6, (cpu[short] - per_chunk * short) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=2000, help="chunks of the long reply")
    parser.add_argument("--runs", type=int, default=5, help="rounds (default 5)")
    parser.add_argument(
        "--no-litellm-backend",
        action="store_true",
        help="leave out (a'), the product with AGENT_LLM_BACKEND=litellm",
    )
    add_json_option(parser)
    # The roles of the child processes this bench starts.
    parser.add_argument("--client", choices=CLIENTS, help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    parser.add_argument("--sizes", type=int, nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--serve-model", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_model:
        serve_model(args.serve_model)
        return
    if args.client:
        print(json.dumps(asyncio.run(client_main(args.client, args.base_url, args.sizes))))
        return
    if args.chunks < 20 or args.runs < 1:
        parser.error("--chunks takes 20 or more, --runs 1 or more")
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    try:
        rows = measure_all(args.chunks, args.runs, not args.no_litellm_backend)
    except KeyboardInterrupt:
        print("\ninterrupted; every process the bench started is stopped", file=sys.stderr)
        sys.exit(130)
    write_json(args.json, rows)


def measure_all(chunks: int, runs: int, litellm_backend: bool) -> list[Row]:
    from agent.llm.client import needs_litellm

    short = max(10, chunks // 10)
    sizes = [short, chunks]
    lean = not needs_litellm(MODEL)
    with (
        scratch_services(),
        tempfile.TemporaryDirectory(prefix="agentsite-chunkcpu-") as folder,
        children(Path(folder) / "logs") as procs,
    ):
        model_port = free_port()
        model = procs.start(
            [PYTHON, __file__, "--serve-model", str(model_port)], name="model", cwd=ROOT
        )
        procs.wait_for_port(model_port, model)
        base_url = f"http://127.0.0.1:{model_port}/v1"
        env, token = start_site(procs, Path(folder), base_url)
        products = {"(a) product, as users run it": Product(procs, env, token, "daphne")}
        if litellm_backend:
            through = {**env, "AGENT_LLM_BACKEND": "litellm"}
            products["(a') product, AGENT_LLM_BACKEND=litellm"] = Product(
                procs, through, token, "daphne-litellm"
            )
        for product in products.values():
            product.measure([short])  # imports, first queries, litellm's load
        labels = {
            "litellm": "(b) litellm alone",
            "httpx": "(c) bare httpx SSE (floor)",
            "aiohttp": "(d) bare aiohttp SSE",
        }
        figures: dict[str, list[tuple[float, float]]] = {
            label: [] for label in [*products, *labels.values()]
        }
        for _ in range(runs):
            for label, product in products.items():
                figures[label].append(fit(product.measure(sizes), short, chunks))
            for kind, label in labels.items():
                figures[label].append(fit(run_client(procs, kind, base_url, sizes), short, chunks))

    med = {
        label: (statistics.median(p for p, _ in values), statistics.median(f for _, f in values))
        for label, values in figures.items()
    }
    path = "its own lean path (aiohttp, no litellm)" if lean else "litellm"
    print(
        f"CPU per streamed chunk: replies of {chunks} and {short} chunks, scripted model in its "
        f"own process; medians of {runs} rounds"
    )
    print(f"The product's default path for {MODEL} is {path}: (a) measures that.")
    bare = {kind: med[label][0] for kind, label in labels.items()}
    print(
        f"   {'':<44} {'µs/chunk':>9} {'fixed ms':>9} {'x litellm':>10} {'x httpx':>8} "
        f"{'x aiohttp':>10}"
    )
    for label, (per_chunk, fixed) in med.items():
        print(
            f"   {label:<44} {per_chunk:9.1f} {fixed:9.1f} {per_chunk / bare['litellm']:10.2f} "
            f"{per_chunk / bare['httpx']:8.2f} {per_chunk / bare['aiohttp']:10.2f}"
        )
    print(
        "   (a) is the daphne process's CPU, from the model's socket to the client's socket; "
        "fixed: a turn's or a request's own cost"
    )
    ours = med["(a) product, as users run it"][0]
    rows = [
        row(
            "chunk_cpu",
            "CPU per chunk, product vs litellm alone",
            ours,
            floor=bare["litellm"],
            unit="µs",
        ),
        row(
            "chunk_cpu",
            "CPU per chunk, product vs bare httpx",
            ours,
            floor=bare["httpx"],
            unit="µs",
        ),
        row(
            "chunk_cpu",
            "CPU per chunk, product vs bare aiohttp",
            ours,
            floor=bare["aiohttp"],
            unit="µs",
        ),
    ]
    through_label = "(a') product, AGENT_LLM_BACKEND=litellm"
    if through_label in med:
        rows.append(
            row(
                "chunk_cpu",
                "CPU per chunk, product on litellm vs litellm alone",
                med[through_label][0],
                floor=bare["litellm"],
                unit="µs",
            )
        )
    return rows


if __name__ == "__main__":
    main()
