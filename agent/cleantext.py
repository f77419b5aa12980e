"""Text from outside made valid once, where it enters: what a model streams and what a tool
returns can hold code points that no later step can store or send.

Two kinds do harm. A lone surrogate (U+D800–U+DFFF without its pair, which a model sends as
a JSON escape such as `"\\udc80"`) is a valid Python `str` but no UTF-8 can encode it: a
database write, a JSON answer or a hook's standard input fails on it. A NUL (U+0000) encodes,
but PostgreSQL stores it in no text or JSON column, and a NUL in an argument list or a path
makes the system call refuse it.

Both become U+FFFD, the replacement character. A lone surrogate already means "a character
that was lost", which is what U+FFFD says. A NUL is replaced rather than dropped: dropped, it
would join what stood on either side of it ("r\\0m" would read "rm"), so what a guard and a
person see would differ from what the model sent; replaced, the text keeps its length and
shows where something was. A surrogate pair that stands as two code points is joined into
the one character it encodes.

Most text has neither, and the check for that is what costs: ASCII text, which is most of
it, is settled by one flag read and one byte search; other text by one UTF-8 encoding.
`bench/clean_text.py` (medians of 7 runs, a loaded two-core machine): 0.7 µs for 64 KB of
ASCII, about half of encoding it once; 104 µs for 64 KB of other scripts, about as much as
encoding it; 0.1 µs for a streamed piece; a tool call's arguments about half of what
parsing them costs.
"""

from __future__ import annotations

import json
import re
from typing import Any

REPLACEMENT = "\ufffd"
# A JSON escape that stands for a NUL or a surrogate, high (D800-DBFF) or low (DC00-DFFF),
# or text that might only look like one (an escaped backslash before "u"): whichever it is,
# parsing the text tells.
_RISKY_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")


def clean_text(text: str) -> str:
    """`text` with every lone surrogate and NUL replaced by U+FFFD; `text` itself, unchanged,
    when it holds neither (the common case, which costs next to nothing)."""
    if text.isascii():
        return text.replace("\x00", REPLACEMENT) if "\x00" in text else text
    try:
        encoded = text.encode()
    except UnicodeEncodeError:
        # UTF-16 with surrogatepass carries the surrogates through; decoding joins each pair
        # that belongs together and replaces the rest.
        repaired = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
        return repaired.replace("\x00", REPLACEMENT)
    return text.replace("\x00", REPLACEMENT) if b"\x00" in encoded else text


def clean_value(value: Any) -> Any:
    """A JSON-like value (dicts, lists, strings, numbers) with its strings and keys cleaned,
    at every depth; `value` itself when nothing needed it, so that a caller can tell.
    Raises RecursionError for a value nested deeper than the interpreter's stack allows."""
    if isinstance(value, str):
        return clean_text(value)
    # Plain loops: one frame a level, as deep as json.loads itself goes.
    if isinstance(value, dict):
        pairs = []
        changed = False
        for key, item in value.items():
            new_key, new_item = clean_value(key), clean_value(item)
            changed = changed or new_key is not key or new_item is not item
            pairs.append((new_key, new_item))
        return dict(pairs) if changed else value
    if isinstance(value, list | tuple):
        items = []
        changed = False
        for item in value:
            new_item = clean_value(item)
            changed = changed or new_item is not item
            items.append(new_item)
        return items if changed else value
    return value


def clean_arguments(text: str) -> str:
    """A tool call's arguments as the model sent them (JSON text), cleaned: the text, with
    any NUL or surrogate in it replaced, and when its JSON escapes stand for one, the JSON
    written again from the cleaned value. Text that is not JSON is only cleaned as text: the
    tool's registry answers the model that it does not parse."""
    text = clean_text(text)
    if "\\" not in text or not _RISKY_ESCAPE.search(text):
        return text
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return text
    try:
        cleaned = clean_value(value)
    except RecursionError:
        return text  # the registry refuses it, as it refuses text that does not parse
    if cleaned is value:
        return text
    return json.dumps(cleaned, ensure_ascii=False)


class PieceCleaner:
    """`clean_text` for a text that comes in pieces (a streamed answer): a high surrogate
    that ends a piece is held back for the next, which may begin with its pair (a server
    that writes a character beyond the BMP as two escapes may send them in two events),
    so that the pieces given out join up to the whole text cleaned."""

    def __init__(self) -> None:
        self._held = ""

    def piece(self, text: str) -> str:
        """`text` cleaned, less a high surrogate at its end, which waits for the next."""
        if self._held:
            text, self._held = self._held + text, ""
        if text and "\ud800" <= text[-1] <= "\udbff":
            text, self._held = text[:-1], text[-1]
        return clean_text(text)

    def rest(self) -> str:
        """What is still held once the text is over: U+FFFD for a surrogate never paired."""
        held, self._held = self._held, ""
        return clean_text(held)


# C0 controls but tab and newline, DEL, the C1 controls (U+0080 to U+009F, which some
# terminals take as ESC sequences of one character: U+009B is CSI), and the bidirectional
# overrides and isolates, which make a line read otherwise than it is.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def visible(text: str) -> str:
    """`text` with each control character but newline and tab written out (`\\x1b`,
    `\\u202e`), for a person to see rather than for a terminal to act on. One character at
    a time, so a sequence split across streamed pieces is shown as surely as a whole one."""
    return _CONTROL.sub(_written_out, text)


def _written_out(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
