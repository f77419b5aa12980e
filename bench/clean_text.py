"""What cleaning text costs where it enters (`agent.cleantext`), next to what the same text
costs anyway (the floor): encoding it as UTF-8 once, which every save and send of it pays;
for a tool call's arguments, parsing them, and writing them as JSON again.

    .venv/bin/python bench/clean_text.py [--kb 64] [--runs 5] [--json PATH]

Clean text, which is nearly all text, is what matters: a streamed piece of a few
characters, a command's output of `--kb` kilobytes in ASCII and in other scripts, and a
tool call's arguments. The figures are medians over `--runs` runs, in microseconds per call.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import timeit
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.cleantext import clean_arguments, clean_text, clean_value
from bench._report import Row, add_json_option, row, write_json


def per_call_us(call: Callable[[], object], number: int) -> float:
    return timeit.timeit(call, number=number) / number * 1e6


def main(kb: int, runs: int) -> list[Row]:
    line = "total 48 -rw-r--r-- 1 ada ada 1234 Nov 28 03:40 report.txt\n"
    ascii_text = (line * (kb * 1024 // len(line) + 1))[: kb * 1024]
    other = ("Größe: 12 Kö — 日本語のテキスト, ελληνικά\n" * (kb * 1024 // 40 + 1))[: kb * 1024]
    arguments = json.dumps({"path": "notes/plan.md", "content": line * 40})
    parsed = json.loads(arguments)
    piece = "Hello"
    # name: (cleaning, what it is set against, that floor's name, calls per run)
    cases: dict[str, tuple[Callable[[], object], Callable[[], object], str, int]] = {
        "a streamed piece": (lambda: clean_text(piece), piece.encode, "encoding", 200_000),
        f"{kb} KB of ASCII": (lambda: clean_text(ascii_text), ascii_text.encode, "encoding", 2000),
        f"{kb} KB of other scripts": (lambda: clean_text(other), other.encode, "encoding", 500),
        "tool arguments (text)": (
            lambda: clean_arguments(arguments),
            lambda: json.loads(arguments),
            "parsing",
            50_000,
        ),
        "tool arguments (parsed)": (
            lambda: clean_value(parsed),
            lambda: json.dumps(parsed),
            "writing",
            50_000,
        ),
    }
    rows: list[Row] = []
    print(f"clean text, medians of {runs} runs, µs per call")
    for name, (clean, floor_call, floor_name, number) in cases.items():
        ours = statistics.median(per_call_us(clean, number) for _ in range(runs))
        floor = statistics.median(per_call_us(floor_call, number) for _ in range(runs))
        print(f"  {name:<26} {ours:9.3f}   {floor_name:<8} {floor:9.3f}   x{ours / floor:5.2f}")
        measure = f"µs to clean {name} vs {floor_name} it"
        rows.append(row("clean_text", measure, ours, floor=floor, unit="µs"))
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb", type=int, default=64)
    parser.add_argument("--runs", type=int, default=5)
    add_json_option(parser)
    args = parser.parse_args()
    write_json(args.json, main(args.kb, args.runs))
