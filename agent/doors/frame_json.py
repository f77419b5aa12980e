"""A chat socket's text frame read as JSON, strictly.

Any text that fits in a frame must come back as a value or as an error the user can read,
never as an exception that ends the socket: Python's reader raises `ValueError` for an
integer past its digit limit (4300 digits) and `RecursionError` for deep nesting. Beyond
that the reader here takes only what a frame can mean one way: no `NaN` or `Infinity`
(not JSON, though Python reads them), no number too large for a float (Python reads it as
infinity), no object that gives a key twice (which value counts would depend on the
reader), and no integer longer than any field takes (the largest is a message id).
"""

from __future__ import annotations

import json
import math
from typing import Any

# A 64-bit id has at most 19 digits; one more leaves room for a sign.
MAX_INTEGER_DIGITS = 20


class UnreadableFrame(ValueError):
    """A frame that is no JSON value a frame may hold; the text says why, for the user."""


def read_frame(text: str) -> Any:
    """The JSON value of `text`, or `UnreadableFrame`."""
    try:
        return json.loads(
            text,
            parse_int=_integer,
            parse_float=_float,
            parse_constant=_constant,
            object_pairs_hook=_object,
        )
    except UnreadableFrame:
        raise
    except RecursionError:
        raise UnreadableFrame("the frame is nested too deeply") from None
    except ValueError:  # JSONDecodeError among them
        raise UnreadableFrame("the frame is not valid JSON") from None


def _integer(text: str) -> int:
    if len(text) > MAX_INTEGER_DIGITS:
        raise UnreadableFrame(
            f"the frame holds an integer longer than {MAX_INTEGER_DIGITS} digits, "
            "which no field takes"
        )
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise UnreadableFrame("the frame holds a number too large to read")
    return value


def _constant(name: str) -> float:
    raise UnreadableFrame(f"the frame is not valid JSON: {name} is not a JSON number")


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        # The key itself is not quoted: it may hold text no frame can send back.
        raise UnreadableFrame("the frame gives one key twice in an object; send each key once")
    return value
