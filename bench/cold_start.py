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
figure is a median over runs: a small machine is noisy. Each part lives in a module of its
own (bench/_cold_start_cli.py, bench/_cold_start_server.py); the warm part and the report
are here.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._cold_start_cli import part_cli  # noqa: E402
from bench._cold_start_server import part_daphne  # noqa: E402
from bench._cold_start_site import Site, median, verdict  # noqa: E402
from bench._loops import (  # noqa: E402
    Loop,
    agent_loop,
    httpx_loop,
    litellm_loop,
    per_round_trip_ms,
    setup_django,
    start_model,
)
from bench._procs import Children, children, scratch_services  # noqa: E402
from bench._report import Row, add_json_option, row, write_json  # noqa: E402

WARM_TARGET = 3.0


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
