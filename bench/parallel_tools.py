"""Tool calls side by side: three `web_fetch` calls of a slow page in one model answer,
against the same three asked for one answer at a time.

    .venv/bin/python bench/parallel_tools.py [--delay 1.0] [--calls 3] [--runs 5] [--json PATH]

Each turn runs through the turn service (`run_turn`), with the scripted model in this
process and a page server on 127.0.0.1 that answers each request after `--delay` seconds.
In one answer the calls run at once and the turn takes about one delay; one at a time it
takes one delay per call, the floor that calls run in order would set. Medians over runs.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._loops import setup_django  # noqa: E402
from bench._report import Row, add_json_option, row, write_json  # noqa: E402
from tests.llm_server import ScriptedLLM  # noqa: E402

# Side by side, a turn should take its slowest call and its own work besides (two model
# calls, three pages read into text, the records), well short of a second call.
TARGET = 1.5


def slow_pages(delay: float) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            time.sleep(delay)
            body = f"<html><body><p>page {self.path}</p></body></html>".encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


async def one_turn(llm: ScriptedLLM, base: str, calls: int, *, together: bool, n: int) -> float:
    from agent.turn.service import run_turn

    fetches: list[tuple[str, dict[str, Any] | str]] = [
        ("web_fetch", {"url": f"{base}/{n}/{i}"}) for i in range(calls)
    ]
    if together:
        llm.tool_calls(fetches)
    else:
        for fetch in fetches:
            llm.tool_calls([fetch])
    llm.reply("Read them all.")
    started = time.perf_counter()
    result = await run_turn(f"bench:parallel{n}", "read the pages", channel="bench")
    took = time.perf_counter() - started
    if not result.success or result.tools_used != ["web_fetch"] * calls:
        raise RuntimeError(f"the turn did not fetch the pages: {result.text}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=1.0, help="seconds per page (1.0)")
    parser.add_argument("--calls", type=int, default=3, help="calls in the answer (3)")
    parser.add_argument("--runs", type=int, default=5, help="turns of each kind (5)")
    add_json_option(parser)
    args = parser.parse_args()
    if args.delay <= 0 or args.calls < 2 or args.runs < 1:
        parser.error("--delay takes seconds above zero, --calls 2 or more, --runs 1 or more")

    pages = slow_pages(args.delay)
    base = f"http://127.0.0.1:{pages.server_address[1]}"
    with tempfile.TemporaryDirectory(prefix="bench-parallel-") as scratch, ScriptedLLM() as llm:
        # The page server is on loopback, which only this setting lets web_fetch reach.
        setup_django(Path(scratch), llm.base_url, AGENT_WEB_ALLOW_PRIVATE="true")
        figures: dict[bool, list[float]] = {True: [], False: []}

        async def runs() -> None:
            # One unmeasured round first: the web tools' first call loads their libraries.
            for n in range(args.runs + 1):
                # Taking turns, so that the machine's drifts fall on both alike.
                for together in (True, False):
                    took = await one_turn(
                        llm, base, args.calls, together=together, n=n * 2 + together
                    )
                    if n:
                        figures[together].append(took)

        asyncio.run(runs())
    pages.shutdown()

    side_by_side = statistics.median(figures[True])
    in_order = statistics.median(figures[False])
    met = side_by_side <= TARGET * args.delay
    print(
        f"\n{args.calls} web_fetch calls of {args.delay:g} s each, one turn (median of {args.runs})"
    )
    print(f"   {'in one answer, side by side':<36} {side_by_side:6.2f} s")
    print(f"   {'one answer each, in order (floor)':<36} {in_order:6.2f} s")
    print(
        f"   target: at most {TARGET:g}x one call ({TARGET * args.delay:.2f} s): "
        f"{'met' if met else 'MISSED'}"
    )
    rows: list[Row] = [
        row(
            "parallel_tools",
            f"{args.calls} slow web_fetch calls in one answer vs one answer each",
            side_by_side,
            floor=in_order,
            unit="s",
            target=f"≤ {TARGET:g} x {args.delay:g} s",
            met=met,
        )
    ]
    write_json(args.json, rows)


if __name__ == "__main__":
    main()
