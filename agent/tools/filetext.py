"""Text as the file tools see it: files that look binary, numbered lines cut at a length
(read_file), exact replacements with a hint when the text differs from the file's only in
whitespace (edit_file), and text that no UTF-8 file can hold."""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterator
from typing import TextIO

from agent.tools.tool_errors import ToolError

MAX_LINE_CHARS = 2000
DEFAULT_READ_LINES = 2000
MAX_READ_CHARS = 100_000
# Above this size the total line count isn't worth a full scan just for a footer.
COUNT_LINES_UP_TO_BYTES = 5 * 1024 * 1024
BINARY_SNIFF_BYTES = 8192


def encoded(text: str, what: str) -> bytes:
    """`text` as UTF-8; ToolError when it holds a lone surrogate, which the model's JSON can
    carry (`"\\ud800"`) but no UTF-8 file can."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolError(
            f"{what} holds a lone surrogate (character {exc.start + 1}), which no UTF-8 file "
            "can hold; send it again without it"
        ) from exc


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


def numbered_lines(raw: io.BufferedReader, path: str, offset: int, limit: int) -> str:
    """read_file's answer: lines `offset`… of the open file `raw`, at most `limit` of them
    and MAX_READ_CHARS characters, numbered, with a note on how to read on."""
    size = os.fstat(raw.fileno()).st_size
    if size == 0:
        return f"File '{path}' is empty (0 bytes)."
    if looks_binary(raw.read(BINARY_SNIFF_BYTES)):
        raise ToolError(f"'{path}' looks like a binary file ({size} bytes); not shown")
    raw.seek(0)
    out: list[str] = []
    chars = 0
    seen = 0  # lines read so far
    last = 0  # last line shown
    more = capped = False
    total: int | None = None
    with io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline=None) as fh:
        lines = iter_lines(fh)
        for lineno, (line, extra) in enumerate(lines, 1):
            seen = lineno
            if lineno < offset:
                continue
            if lineno >= offset + limit:
                more = True
                break
            if extra:
                line = f"{line} ... [line truncated, {extra} more chars]"
            entry = f"{lineno:6d}\t{line}"
            if out and chars + len(entry) + 1 > MAX_READ_CHARS:
                more = capped = True
                break
            out.append(entry)
            chars += len(entry) + 1
            last = lineno
        if more and size <= COUNT_LINES_UP_TO_BYTES:
            total = seen + sum(1 for _ in lines)
    if not out:
        return f"Error: offset {offset} is past the end of '{path}' (it has {seen} lines)."
    text = "\n".join(out)
    if more:
        of_total = f" of {total}" if total is not None else ""
        why = f" (output capped at {MAX_READ_CHARS} characters)" if capped else ""
        text += (
            f"\n\n[Showing lines {offset}-{last}{of_total}{why}. "
            f"Call read_file with offset={last + 1} to read more.]"
        )
    return text


def replaced(content: str, path: str, old: str, new: str, every: bool) -> tuple[str, int]:
    """`content` with `old` put as `new` (once, unless `every`), and how many times;
    ToolError when `old` is not there, or is there more than once and not `every`."""
    count = content.count(old)
    if count == 0 and "\r\n" in content and "\r\n" not in old and "\n" in old:
        # The model usually writes \n even when the file uses Windows line endings.
        old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
        count = content.count(old)
    if count == 0:
        raise ToolError(f"old_text not found in {path}.{whitespace_hint(content, old)}")
    if count > 1 and not every:
        raise ToolError(
            f"old_text matched {count} times in {path}; add more surrounding context to "
            "make it unique, or set replace_all to true to replace every occurrence"
        )
    updated = content.replace(old, new) if every else content.replace(old, new, 1)
    return updated, count if every else 1
