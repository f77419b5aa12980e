"""Many web chats at once, each running a 3-call turn, on one daphne process or several.

    DATABASE_URL=postgres://... .venv/bin/python bench/concurrency.py [--sessions 200]
    DATABASE_URL=postgres://... REDIS_URL=redis://... .venv/bin/python bench/concurrency.py --processes 1 2
        [--layouts personal200,team50x4] [--runs 3] [--no-settle] [--watchers auto|on|off]
        [--grace 30] [--json PATH]

Each chat is opened over real WebSockets and sent one message; the scripted model (its own
process) answers every call after `--call-ms` and makes each turn read a file twice before
its streamed reply: three model calls. Two layouts (`--layouts`), taking turns in each of
`--runs` runs: `personal200`, 200 personal chats with one socket each (`personal` alone:
`--sessions` of them), and `team50x4`, 50 team chats each open on 4 sockets, every one a
different member of the team, where one member sends, once every socket shows all 4 as
looking (`--no-settle`: once each has its history), and all 4 receive the streamed reply
(`bench/_team_layout.py`). Both deliver 4,000 reply chunks to 200 sockets; the team layout
does it with a quarter of the turns.

For each layout it prints the medians over the runs of the time for all turns to finish
against the ideal (the three calls back to back, as if the site cost nothing), turns that
failed, the p50/p99 delay of the reply's chunks from the model to each socket that received
them, the turns per second, the web processes' CPU per turn and per delivered chunk (every
chunk a socket received: read from /proc before and after), and the chunks of the saved
replies that a socket never received. Beside them, the floor, measured in each run just
before the layout: the same conversations (one per chat) on bare httpx straight to the
model, no site: what the machine allows; its chunk delay, and this process's CPU per chunk
read. Sockets are spread over the processes round robin; more than one process needs
`REDIS_URL` (the channel layer they share). Without `DATABASE_URL` it runs on SQLite and says
so. With `DATABASE_URL` and `REDIS_URL` it makes a PostgreSQL database of its own next to the
one named, drops it at the end, and uses a Redis database of its own
(`_procs.scratch_services`).

No event lost in the channel layer: with watchers (by default on layouts of two processes or
more), a second pass gives each personal chat a second socket on another process, which must
receive the turn's tool results and final `message` through the layer within `--grace`
seconds (30) of the sender; "lost" counts those that did not. Tool results travel only
through the layer (a socket's own look at the run record, which could stand in for a lost
final message, has no tool cards), so a loss cannot hide. The lag of the final message
behind the sender's is printed too. The pass is not timed, so the layouts' figures stay
comparable. A team chat's viewers are such watchers already, counted chunk by chunk.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import websockets

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._chat_replies import FAILURES, Reply, Tally, bare_floor  # noqa: E402
from bench._conc_layouts import (  # noqa: E402
    HEADER,
    Figures,
    Layout,
    layout_rows,
    parse_layouts,
    report,
    table_line,
)
from bench._procs import (  # noqa: E402
    Children,
    bench_env,
    children,
    cpu_seconds,
    daphne_argv,
    free_port,
    scratch_services,
    tail,
)
from bench._report import Row, add_json_option, row, write_json  # noqa: E402
from bench._team_layout import Team, make_teams, measure_team, new_chats  # noqa: E402

CALLS = 3
CHUNKS = 20


class Watch:
    """What the watchers of one pass saw: when each got its turn's final message, against
    when the sender got it."""

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self.lost = 0
        # Of the lost, those still behind on the turn's earlier events at the deadline: the
        # layer was slow to deliver rather than missing one event.
        self.behind = 0
        self.lags: list[float] = []


async def one_turn(
    url: str, chat: str, tally: Tally, watcher: str = "", watch: Watch | None = None
) -> bool:
    """One personal chat's turn; whether it ended with its reply. With a `watcher` URL, a
    second socket on the same chat there, which must get the reply too (counted in `watch`)."""
    try:
        async with contextlib.AsyncExitStack() as stack:
            ws = await stack.enter_async_context(
                websockets.connect(url.format(chat=chat), max_size=None, open_timeout=60)
            )
            assert json.loads(await ws.recv())["type"] == "history"
            watching: asyncio.Task[float] | None = None
            if watch is not None:
                # Opened once the sender's socket has made the session, and in the group
                # before the turn starts: it has every event of the turn coming to it.
                other = await stack.enter_async_context(
                    websockets.connect(watcher.format(chat=chat), max_size=None, open_timeout=60)
                )
                assert json.loads(await other.recv())["type"] == "history"
                seen: list[str] = []
                watching = asyncio.create_task(final_message(other, seen))
                stack.callback(watching.cancel)
            await ws.send(json.dumps({"type": "message", "content": "read it twice"}))
            reply = Reply()
            async with asyncio.timeout(120):
                if not await reply.read(ws):
                    return False
            tally.add(reply, reply.saved)
            if watch is not None and watching is not None:
                ended = time.perf_counter()
                done, _ = await asyncio.wait([watching], timeout=watch.grace)
                if done and not watching.exception():
                    watch.lags.append(max(0.0, watching.result() - ended) * 1000)
                else:
                    watch.lost += 1
                    watch.behind += "thinking_finished" not in seen
            return True
    except (OSError, TimeoutError, websockets.WebSocketException, AssertionError) as exc:
        FAILURES[f"{type(exc).__name__}: {str(exc)[:60]}"] += 1
        return False


TOOL_RESULTS = 2  # the scripted turn reads a file twice


async def final_message(ws: Any, seen: list[str]) -> float:
    """When the turn's final message reached a socket that did not start the turn, once its
    tool results have too; `seen` gets the type of every frame."""
    arrived = 0.0
    while not (arrived and seen.count("tool_result") >= TOOL_RESULTS):
        frame = json.loads(await ws.recv())
        seen.append(frame["type"])
        if frame["type"] == "message" and frame.get("role") == "assistant" and not arrived:
            arrived = time.perf_counter()
    return arrived


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def measure(
    urls: list[str], sessions: int, tag: str, tally: Tally, watch: Watch | None = None
) -> tuple[float, int]:
    """Every personal chat's turn at once, round robin over the processes; with `watch`,
    each chat's watcher on the next process."""
    started = time.perf_counter()
    done = await asyncio.gather(
        *(
            one_turn(urls[i % len(urls)], f"{tag}{i}", tally, urls[(i + 1) % len(urls)], watch)
            for i in range(sessions)
        )
    )
    return time.perf_counter() - started, done.count(False)


@dataclass
class Site:
    """The daphne processes of one run of layouts, and who talks to them."""

    bases: list[str]  # ws://127.0.0.1:<port>, one per process
    webs: list[subprocess.Popen[bytes]]
    token: str  # the personal chats' user's
    teams: list[Team]
    model: str  # the scripted model's base URL, for the floor
    settle: bool  # a team chat's sender waits for every viewer to show as looking

    def cpu(self) -> float:
        return sum(cpu_seconds(web.pid) for web in self.webs)


def start_site(
    procs: Children, env: dict[str, str], count: int
) -> tuple[list[str], list[subprocess.Popen[bytes]]]:
    ports = [free_port() for _ in range(count)]
    webs = [
        procs.start(daphne_argv(port), name=f"daphne-{port}", cwd=ROOT, env=env) for port in ports
    ]
    for port, web in zip(ports, webs, strict=True):
        procs.wait_for_port(port, web)
    return [f"ws://127.0.0.1:{port}" for port in ports], webs


def turns_of(site: Site, layout: Layout, tag: str, tally: Tally, grace: float) -> Any:
    """The layout's turns, all at once, as a coroutine: (seconds, failed); the CPU its
    team chats' making costs is spent before it starts."""
    if layout.viewers:
        teams = [Team(t.slug, t.tokens[: layout.viewers]) for t in site.teams[: layout.chats]]
        keys = asyncio.run(new_chats(site.bases[0].replace("ws://", "http://", 1), teams))
        return measure_team(site.bases, keys, teams, tally, grace, site.settle)
    urls = [f"{base}/ws/chat/{{chat}}/?token={site.token}" for base in site.bases]
    return measure(urls, layout.chats, tag, tally)


def run_layout(site: Site, layout: Layout, tag: str, grace: float) -> Figures:
    """One run of `layout`, after its floor."""
    floor, floor_cpu, floor_tally = asyncio.run(bare_floor(site.model, layout.chats))
    tally = Tally()
    turns = turns_of(site, layout, tag, tally, grace)
    cpu = site.cpu()
    elapsed, failed = asyncio.run(turns)
    cpu = site.cpu() - cpu
    return Figures(
        elapsed=elapsed,
        failed=failed,
        p50=tally.percentile(0.5),
        p99=tally.percentile(0.99),
        cpu_turn_ms=cpu * 1000 / layout.chats,
        cpu_chunk_us=cpu * 1e6 / max(1, tally.delivered),
        delivered=tally.delivered,
        lost=tally.lost,
        doubled=tally.doubled,
        floor=floor,
        floor_p99=floor_tally.percentile(0.99),
        floor_chunk_us=floor_cpu * 1e6 / max(1, floor_tally.delivered),
        p99_elsewhere=tally.percentile(0.99, elsewhere=True),
    )


def watch_pass(site: Site, layout: Layout, count: int, grace: float) -> tuple[Watch, int]:
    """The untimed pass of personal chats with a watcher each on the next process."""
    watch = Watch(grace)
    urls = [f"{base}/ws/chat/{{chat}}/?token={site.token}" for base in site.bases]
    _, failed = asyncio.run(measure(urls, layout.chats, f"w{count}-", Tally(), watch))
    lags = sorted(watch.lags) or [0.0]
    where = "another process" if count > 1 else "the same process"
    print(
        f"       watchers: a second socket per personal chat on {where}; {watch.lost} of "
        f"{layout.chats} missed a tool result or the final message within {grace:g} s of the "
        f"sender ({watch.behind} of them still behind on the turn's earlier events);\n"
        f"       final message's lag behind the sender's: p50 {statistics.median(lags):.0f} "
        f"ms, p99 {lags[min(len(lags) - 1, int(len(lags) * 0.99))]:.0f} ms"
    )
    return watch, failed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200, help="chats of `personal`")
    parser.add_argument(
        "--layouts",
        default="personal,team50x4",
        help="comma-separated: personal (--sessions chats), personal<N>, team<N>x<V> "
        "(N team chats, V viewers each); default personal,team50x4",
    )
    parser.add_argument("--runs", type=int, default=3, help="runs, whose medians are shown")
    parser.add_argument("--call-ms", type=float, default=100.0)
    parser.add_argument("--processes", type=int, nargs="+", default=[1])
    parser.add_argument(
        "--watchers",
        choices=["auto", "on", "off"],
        default="auto",
        help="a pass with a watcher socket per personal chat on another process (auto: 2+)",
    )
    parser.add_argument(
        "--grace",
        type=float,
        default=30.0,
        help="seconds after the sender a watcher or viewer may take to get the turn's events",
    )
    parser.add_argument(
        "--no-settle",
        action="store_true",
        help="a team chat's sender sends once every socket has its history, not waiting for "
        "each to show all the chat's viewers as looking",
    )
    add_json_option(parser)
    args = parser.parse_args()
    try:
        layouts = parse_layouts(args.layouts, args.sessions)
    except ValueError as exc:
        parser.error(str(exc))
    if max(args.processes) > 1 and not os.environ.get("REDIS_URL"):
        parser.error("more than one process needs REDIS_URL (the channel layer they share)")

    database = (
        "PostgreSQL" if os.environ.get("DATABASE_URL", "").startswith("postgres") else "SQLite"
    )
    redis = bool(os.environ.get("REDIS_URL"))
    ideal = CALLS * args.call_ms / 1000
    print(
        f"{', '.join(layout.describe() for layout in layouts)}; each turn {CALLS} model calls "
        f"of {args.call_ms:g} ms (ideal {ideal:.2f} s), a reply of {CHUNKS} chunks; "
        f"{database}, {'Redis' if redis else 'in-memory'} channel layer; medians of "
        f"{args.runs} runs"
    )
    rows: list[Row] = []
    try:
        with (
            scratch_services(),
            tempfile.TemporaryDirectory(prefix="agentsite-conc-") as folder,
            children(Path(folder) / "logs") as procs,
        ):
            scratch = Path(folder)
            llm_port = free_port()
            env = bench_env(scratch, f"http://127.0.0.1:{llm_port}/v1")
            if os.environ.get("REDIS_URL"):
                env["REDIS_URL"] = os.environ["REDIS_URL"]
            env.update(
                {
                    "DJANGO_SUPERUSER_USERNAME": "bench",
                    "DJANGO_SUPERUSER_PASSWORD": "bench-password-1",
                    "AGENT_TURN_RATE": "1000000/min",
                }
            )
            python = sys.executable

            def manage(*command: str) -> str:
                return procs.run([python, "manage.py", *command], name="manage", cwd=ROOT, env=env)

            manage("migrate", "-v0")
            manage("ensure_login")
            token = manage("drf_create_token", "-r", "bench").split()[2]
            for folder_of_bench in (scratch / "workspace", scratch / "workspace/users/bench"):
                folder_of_bench.mkdir(parents=True, exist_ok=True)
                (folder_of_bench / "hello.txt").write_text("Hello World\n")
            teamed = [layout for layout in layouts if layout.viewers]
            teams = []
            if teamed:
                teams = make_teams(
                    procs,
                    [python, str(ROOT / "manage.py")],
                    env,
                    max(layout.chats for layout in teamed),
                    max(layout.viewers for layout in teamed),
                )
            model = [python, "-m", "tests.llm_server", "--port", str(llm_port)]
            model += ["--tool-loop", str(CALLS - 1), "--delay", str(args.call_ms / 1000)]
            model += ["--stamps", str(CHUNKS)]
            llm = procs.start(model, name="llm_server", cwd=ROOT, env=env)
            procs.wait_for_port(llm_port, llm)

            medians: dict[tuple[int, str], Figures] = {}
            rates: dict[tuple[int, str], float] = {}
            for count in args.processes:
                bases, webs = start_site(procs, env, count)
                model_url = f"http://127.0.0.1:{llm_port}/v1"
                site = Site(bases, webs, token, teams, model_url, not args.no_settle)
                for layout in layouts:  # warm: a few turns of each, untimed
                    asyncio.run(turns_of(site, layout.warm(), f"warm{count}-", Tally(), 30))
                runs: dict[str, list[Figures]] = {layout.name: [] for layout in layouts}
                print(HEADER)
                for run in range(args.runs):  # the layouts take turns
                    for layout in layouts:
                        tag = f"{layout.name}-{count}-{run}-"
                        figures = run_layout(site, layout, tag, args.grace)
                        runs[layout.name].append(figures)
                        print(table_line(count, layout, figures, ideal), f" run {run + 1}")
                failed = 0
                watch: Watch | None = None
                personal = next((layout for layout in layouts if not layout.viewers), None)
                if personal and (args.watchers == "on" or (args.watchers == "auto" and count > 1)):
                    watch, failed = watch_pass(site, personal, count, args.grace)
                print(f"       peak memory of the busiest daphne: "
                      f"{max(peak_rss_mib(web.pid) for web in webs):.0f} MiB")  # fmt: skip
                for layout in layouts:
                    f = medians[count, layout.name] = Figures.median(runs[layout.name])
                    if layout is personal:
                        f.failed += failed  # the watchers' pass's turns
                    rates[count, layout.name] = (layout.chats - f.failed / args.runs) / f.elapsed
                    name = (
                        f"{layout.describe()}, {count} daphne{'s' if count > 1 else ''}, "
                        f"{database}{' + Redis' if redis else ''}"
                    )
                    rows += layout_rows(name, f, ideal)
                    if watch is not None and layout is personal:
                        rows.append(
                            row("concurrency", f"{name}: watchers that lost an event",
                                watch.lost, target="0", met=watch.lost == 0)
                        )  # fmt: skip
                if failed or any(f.failed for f in medians.values()):
                    for log in sorted(procs.logs.glob("daphne-*.log")):
                        print(f"  {log.name}:{tail(log, 12)}")
                for web in webs:
                    procs.stop(web)
            report(args, layouts, medians, rates, ideal, rows)
    except KeyboardInterrupt:
        print("\ninterrupted; every process the bench started is stopped", file=sys.stderr)
        sys.exit(130)
    write_json(args.json, rows)


if __name__ == "__main__":
    main()
