"""Part 1 of bench/cold_start.py: a fresh `manage.py agent -m hello` process, to its exit,
against a fresh `python -c` process making one streamed request with bare httpx (and
nanobot's, when it is on the PATH): wall time and peak RSS.
"""

from __future__ import annotations

import shutil
import time

from bench._cold_start_site import PYTHON, ROOT, Site, median, verdict
from bench._report import Row, row

MIB = 1024  # ru_maxrss is in KiB on Linux
WALL_TARGET = 2.0
RSS_TARGET_MIB = 150

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
