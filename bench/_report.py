"""The headline figures a bench hands to bench/all.py.

Every bench takes `--json PATH` and, when given it, writes there a list of rows of one
shape, which all.py gathers into one table. A bench judges its own targets (`met`),
since only it knows whether a figure should be above or below its mark.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import TypedDict


class Row(TypedDict):
    bench: str
    measure: str
    ours: float | None
    floor: float | None
    ratio: float | None
    target: str
    met: bool | None
    unit: str


def row(
    bench: str,
    measure: str,
    ours: float | None,
    *,
    floor: float | None = None,
    unit: str = "",
    target: str = "",
    met: bool | None = None,
) -> Row:
    """One figure; `ratio` is ours over the floor, when there is a floor to divide by."""
    ratio = ours / floor if ours is not None and floor else None
    return {
        "bench": bench,
        "measure": measure,
        "ours": _finite(ours),
        "floor": _finite(floor),
        "ratio": _finite(ratio),
        "target": target,
        "met": met,
        "unit": unit,
    }


def _finite(value: float | None) -> float | None:
    # JSON has no NaN: a figure that could not be had is null.
    return None if value is None or not math.isfinite(value) else float(value)


def add_json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json",
        type=Path,
        metavar="PATH",
        help="also write the headline figures to PATH, as rows for bench/all.py",
    )


def write_json(path: Path | None, rows: list[Row]) -> None:
    if path is not None:
        path.write_text(json.dumps(rows, indent=1) + "\n")
