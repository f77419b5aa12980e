"""Text as the file tools see it: files that look binary, lines cut at a length, and a hint
when edit_file's text differs from the file's only in whitespace."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TextIO

MAX_LINE_CHARS = 2000


def looks_binary(sample: bytes) -> bool:
    if b"\x00" in sample:
        return True
    if not sample:
        return False
    text = sample.decode("utf-8", errors="replace")
    # Allow a cut multi-byte character at the end of the sample.
    bad = text[:-4].count("\ufffd") + sum(
        1 for ch in text if ord(ch) < 32 and ch not in "\t\n\r\f\b\x1b"
    )
    return bad > len(text) * 0.1


def iter_lines(fh: TextIO) -> Iterator[tuple[str, int]]:
    """Yield ``(line, chars_dropped)`` with each line cut at MAX_LINE_CHARS.

    Reads long lines in bounded chunks so a huge single-line file (minified JS, a data
    dump) never has to fit in memory.
    """
    while True:
        chunk = fh.readline(MAX_LINE_CHARS + 1)
        if not chunk:
            return
        if chunk.endswith("\n"):
            yield chunk[:-1], 0
            continue
        head = chunk[:MAX_LINE_CHARS]
        dropped = len(chunk) - len(head)
        rest = chunk
        while not rest.endswith("\n"):
            rest = fh.readline(65536)
            if not rest:
                break
            dropped += len(rest)
        if rest.endswith("\n") and rest is not chunk:
            dropped -= 1
        yield head, dropped


def whitespace_hint(content: str, old: str) -> str:
    words = old.split()
    if not words:
        return ""
    pattern = r"\s+".join(re.escape(word) for word in words)
    match = re.search(pattern, content)
    if match is None:
        return " Read the file again to get the exact current text."
    line = content.count("\n", 0, match.start()) + 1
    return (
        f" A match that differs only in whitespace exists at line {line}; "
        "copy the exact text (indentation and line breaks included) from read_file."
    )
