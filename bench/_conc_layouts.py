"""The layouts of bench/concurrency.py, the figures of one run of one, and the table they
are printed in, side by side."""

from __future__ import annotations

import argparse
import re
import statistics
from dataclasses import dataclass, fields

from bench._chat_replies import FAILURES
from bench._report import Row, row

IDEAL_TARGET = 1.2
P99_TARGET_MS = 20.0
SCALE_TARGET = 1.8
LAYOUT = re.compile(r"personal(\d*)|team([1-9]\d*)x([1-9]\d*)")


@dataclass(frozen=True)
class Layout:
    name: str
    chats: int
    viewers: int  # sockets per chat, each a different member; 0: a personal chat's one

    def describe(self) -> str:
        if not self.viewers:
            return f"{self.chats} personal chats"
        return f"{self.chats} team chats x {self.viewers} viewers"

    def warm(self) -> Layout:
        return Layout(self.name, min(self.chats, 20 if not self.viewers else 5), self.viewers)


def parse_layouts(text: str, sessions: int) -> list[Layout]:
    layouts = []
    for name in text.split(","):
        match = LAYOUT.fullmatch(name.strip())
        if match is None:
            raise ValueError(f"{name!r}: a layout is personal, personal<N> or team<N>x<V>")
        personal, chats, viewers = match.groups()
        if chats is None:
            count = int(personal or sessions)
            layouts.append(Layout(f"personal{count}", count, 0))
        else:
            layouts.append(Layout(match.group(0), int(chats), int(viewers)))
    return layouts


@dataclass
class Figures:
    """One run of one layout, and its floor."""

    elapsed: float
    failed: int
    p50: float
    p99: float
    cpu_turn_ms: float
    cpu_chunk_us: float
    delivered: int
    lost: int
    doubled: int
    floor: float
    floor_p99: float
    floor_chunk_us: float
    p99_elsewhere: float = 0.0  # of the team chats' viewers on another process than the turn

    @staticmethod
    def median(runs: list[Figures]) -> Figures:
        """The median of each figure; counts of what went wrong, summed over the runs."""
        summed = ("failed", "lost", "doubled")
        return Figures(
            *(
                sum(getattr(run, f.name) for run in runs)
                if f.name in summed
                else statistics.median(getattr(run, f.name) for run in runs)
                for f in fields(Figures)
            )
        )


HEADER = (
    f"{'daphne':>6} {'layout':<16} {'done in':>8} {'x ideal':>7} {'turns/s':>7} {'failed':>6} "
    f"{'p50 chunk':>9} {'p99 chunk':>9} {'CPU/turn':>8} {'CPU/chunk':>9} {'chunks':>6} "
    f"{'lost':>4} | {'floor':>6} {'p99':>7} {'CPU/chunk':>9}"
)


def table_line(count: int, layout: Layout, f: Figures, ideal: float) -> str:
    return (
        f"{count:>6} {layout.name:<16} {f.elapsed:>7.2f}s {f.elapsed / ideal:>7.1f} "
        f"{(layout.chats - f.failed) / f.elapsed:>7.1f} {f.failed:>6} {f.p50:>7.1f}ms "
        f"{f.p99:>7.1f}ms {f.cpu_turn_ms:>6.1f}ms {f.cpu_chunk_us:>7.0f}µs {f.delivered:>6.0f} "
        f"{f.lost:>4} | {f.floor:>5.2f}s {f.floor_p99:>5.1f}ms {f.floor_chunk_us:>7.0f}µs"
    )


def layout_rows(name: str, f: Figures, ideal: float) -> list[Row]:
    return [
        row("concurrency", f"{name}: all done vs ideal", f.elapsed, floor=ideal, unit="s",
            target=f"ratio ≤ {IDEAL_TARGET:g}", met=f.elapsed <= IDEAL_TARGET * ideal),
        row("concurrency", f"{name}: all done vs bare httpx", f.elapsed, floor=f.floor,
            unit="s"),
        row("concurrency", f"{name}: failed turns", f.failed, target="0", met=f.failed == 0),
        row("concurrency", f"{name}: reply chunk delay p99", f.p99, floor=f.floor_p99,
            unit="ms", target=f"< {P99_TARGET_MS:g} ms", met=f.p99 < P99_TARGET_MS),
        row("concurrency", f"{name}: daphne CPU per delivered chunk", f.cpu_chunk_us,
            floor=f.floor_chunk_us, unit="µs"),
        row("concurrency", f"{name}: reply chunks lost", f.lost, target="0", met=f.lost == 0),
    ]  # fmt: skip


def report(
    args: argparse.Namespace,
    layouts: list[Layout],
    medians: dict[tuple[int, str], Figures],
    rates: dict[tuple[int, str], float],
    ideal: float,
    rows: list[Row],
) -> None:
    """The medians of every layout side by side, and how they compare."""
    print(f"\nmedians of {args.runs} runs (failed, lost: summed over them); floor: the same "
          f"conversations on bare httpx, no site")  # fmt: skip
    print(HEADER)
    for count in args.processes:
        for layout in layouts:
            print(table_line(count, layout, medians[count, layout.name], ideal))
    for reason, times in FAILURES.most_common(5):
        print(f"  failed {times}x: {reason}")
    doubled = sum(f.doubled for f in medians.values())
    if doubled:
        print(f"  {doubled} chunks reached a socket twice")
    if any(f.lost for f in medians.values()):
        print("  a lost chunk has no delay: the delays are those of the chunks that came")
    for count in args.processes:
        for layout in layouts if count > 1 else ():
            f = medians[count, layout.name]
            if layout.viewers:
                print(f"{layout.name}, {count} daphnes: chunk delay p99 of the viewers on "
                      f"another process than the turn {f.p99_elsewhere:.1f} ms")  # fmt: skip
    first = layouts[0]
    for count in args.processes:
        base = medians[count, first.name]
        for layout in layouts[1:]:
            f = medians[count, layout.name]
            print(f"{layout.name} beside {first.name}, {count} daphne{'s' if count > 1 else ''}: "
                  f"chunk delay p99 {f.p99 / base.p99:.2f}x, daphne CPU per delivered chunk "
                  f"{f.cpu_chunk_us / base.cpu_chunk_us:.2f}x")  # fmt: skip
            rows.append(
                row("concurrency", f"{layout.name} vs {first.name}, {count} daphne(s): daphne "
                    "CPU per delivered chunk", f.cpu_chunk_us, floor=base.cpu_chunk_us, unit="µs")
            )  # fmt: skip
    if 1 in args.processes:
        for count in args.processes:
            for layout in layouts if count > 1 else ():
                rate, one = rates[count, layout.name], rates[1, layout.name]
                print(f"{layout.name}: throughput with {count} processes: {rate / one:.2f}x one")
                rows.append(
                    row("concurrency", f"{layout.name}: turns/s, {count} daphnes vs 1", rate,
                        floor=one, unit="/s", target=f"ratio ≥ {SCALE_TARGET:g}",
                        met=rate >= SCALE_TARGET * one)
                )  # fmt: skip
