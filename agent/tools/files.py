"""File tools: read, write, edit, append, list and glob inside the workspace fence."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from wcmatch import glob as wcglob

from agent.tools.base import Tool, ToolContext, ToolError
from agent.tools.guards import Workspace, is_noise_dir

DEFAULT_READ_LINES = 2000
MAX_LINE_CHARS = 2000
MAX_READ_CHARS = 100_000
# Above this size the total line count isn't worth a full scan just for a footer.
COUNT_LINES_UP_TO_BYTES = 5 * 1024 * 1024
BINARY_SNIFF_BYTES = 8192
MAX_LIST_ENTRIES = 500
# "*", "?" and [...] stop at "/"; a "**" segment spans any depth, none included; dot-files
# match like other names; case always counts. Braces, extglobs and a leading "!" are literal.
GLOB_FLAGS = wcglob.GLOBSTAR | wcglob.DOTMATCH | wcglob.CASE | wcglob.FORCEUNIX


class _WorkspaceTool(Tool):
    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    def fence(self, ctx: ToolContext) -> Workspace:
        """Where this call may work: the turn's user's folder, else the tool's workspace."""
        return ctx.workspace or self.workspace

    def _existing_file(self, fence: Workspace, path: str) -> Path:
        target = fence.resolve(path)
        if not target.exists():
            raise ToolError(f"file not found: {path}")
        if target.is_dir():
            raise ToolError(f"'{path}' is a directory, not a file; use list_dir to see it")
        return target

    def _writable_file(self, fence: Workspace, path: str) -> Path:
        target = fence.resolve(path)
        if target.is_dir():
            raise ToolError(f"'{path}' is a directory, not a file")
        target.parent.mkdir(parents=True, exist_ok=True)
        return target


def _looks_binary(sample: bytes) -> bool:
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


def _iter_lines(fh: TextIO) -> Iterator[tuple[str, int]]:
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


class ReadFileTool(_WorkspaceTool):
    name = "read_file"
    description = (
        "Read a text file from the workspace. Returns numbered lines (cat -n style). "
        f"Reads up to {DEFAULT_READ_LINES} lines by default; use offset (1-based line number) "
        "and limit to page through long files."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path, relative to the workspace."},
            "offset": {"type": "integer", "minimum": 1, "description": "First line to read."},
            "limit": {"type": "integer", "minimum": 1, "description": "Number of lines."},
        },
        "required": ["path"],
        "additionalProperties": False,
    }

    async def execute(self, ctx: ToolContext, /, **kwargs: Any) -> str:
        path: str = kwargs["path"]
        offset: int = kwargs.get("offset") or 1
        limit: int = kwargs.get("limit") or DEFAULT_READ_LINES
        target = self._existing_file(self.fence(ctx), path)
        return await asyncio.to_thread(self._read, target, path, offset, limit)

    def _read(self, target: Path, path: str, offset: int, limit: int) -> str:
        size = target.stat().st_size
        if size == 0:
            return f"File '{path}' is empty (0 bytes)."
        with target.open("rb") as fh:
            if _looks_binary(fh.read(BINARY_SNIFF_BYTES)):
                raise ToolError(f"'{path}' looks like a binary file ({size} bytes); not shown")
        out: list[str] = []
        chars = 0
        seen = 0  # lines read so far
        last = 0  # last line shown
        more = capped = False
        total: int | None = None
        with target.open("r", encoding="utf-8", errors="replace", newline=None) as fh:
            lines = _iter_lines(fh)
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


class WriteFileTool(_WorkspaceTool):
    name = "write_file"
    description = (
        "Create or overwrite a file in the workspace with the given content (UTF-8). "
        "Parent folders are created as needed."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path, relative to the workspace."},
            "content": {"type": "string", "description": "The full new content of the file."},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    }

    async def execute(self, ctx: ToolContext, /, **kwargs: Any) -> str:
        path: str = kwargs["path"]
        data = kwargs["content"].encode("utf-8")
        target = self._writable_file(self.fence(ctx), path)
        await asyncio.to_thread(target.write_bytes, data)
        return f"Wrote {len(data)} bytes to {path}"


class AppendFileTool(_WorkspaceTool):
    name = "append_file"
    description = (
        "Append content to the end of a file in the workspace; the file (and its folders) "
        "is created if missing. Include a leading newline yourself if one is needed."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path, relative to the workspace."},
            "content": {"type": "string", "description": "Text to append."},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    }

    async def execute(self, ctx: ToolContext, /, **kwargs: Any) -> str:
        path: str = kwargs["path"]
        data = kwargs["content"].encode("utf-8")
        target = self._writable_file(self.fence(ctx), path)

        def append() -> None:
            with target.open("ab") as fh:
                fh.write(data)

        await asyncio.to_thread(append)
        return f"Appended {len(data)} bytes to {path}"


class EditFileTool(_WorkspaceTool):
    name = "edit_file"
    description = (
        "Replace exact text in a file. old_text must match the file exactly (including "
        "whitespace and indentation) and be unique unless replace_all is true."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path, relative to the workspace."},
            "old_text": {"type": "string", "description": "Exact text to find."},
            "new_text": {"type": "string", "description": "Text to put in its place."},
            "replace_all": {
                "type": "boolean",
                "default": False,
                "description": "Replace every occurrence instead of requiring one match.",
            },
        },
        "required": ["path", "old_text", "new_text"],
        "additionalProperties": False,
    }

    async def execute(self, ctx: ToolContext, /, **kwargs: Any) -> str:
        path: str = kwargs["path"]
        old: str = kwargs["old_text"]
        new: str = kwargs["new_text"]
        replace_all: bool = kwargs.get("replace_all", False)
        if not old:
            raise ToolError("old_text must not be empty; use write_file to create a file")
        target = self._existing_file(self.fence(ctx), path)
        try:
            content = (await asyncio.to_thread(target.read_bytes)).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ToolError(f"'{path}' is not a UTF-8 text file") from exc

        count = content.count(old)
        if count == 0 and "\r\n" in content and "\r\n" not in old and "\n" in old:
            # The model usually writes \n even when the file uses Windows line endings.
            old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
            count = content.count(old)
        if count == 0:
            raise ToolError(f"old_text not found in {path}.{_whitespace_hint(content, old)}")
        if count > 1 and not replace_all:
            raise ToolError(
                f"old_text matched {count} times in {path}; add more surrounding context to "
                "make it unique, or set replace_all to true to replace every occurrence"
            )
        updated = content.replace(old, new) if replace_all else content.replace(old, new, 1)
        await asyncio.to_thread(target.write_bytes, updated.encode("utf-8"))
        done = count if replace_all else 1
        return f"Replaced {done} occurrence{'s' if done != 1 else ''} in {path}"


def _whitespace_hint(content: str, old: str) -> str:
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


class ListDirTool(_WorkspaceTool):
    name = "list_dir"
    description = (
        "List a directory in the workspace. Folders end with '/'. Set recursive to list "
        "everything below it. VCS folders, caches and virtualenvs are skipped."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "default": ".",
                "description": "Directory, relative to the workspace (default: the root).",
            },
            "recursive": {"type": "boolean", "default": False},
        },
        "additionalProperties": False,
    }

    def __init__(self, workspace: Workspace, *, max_entries: int = MAX_LIST_ENTRIES) -> None:
        super().__init__(workspace)
        self.max_entries = max_entries

    async def execute(self, ctx: ToolContext, /, **kwargs: Any) -> str:
        path: str = kwargs.get("path") or "."
        recursive: bool = kwargs.get("recursive", False)
        target = self.fence(ctx).resolve(path)
        if not target.exists():
            raise ToolError(f"directory not found: {path}")
        if not target.is_dir():
            raise ToolError(f"'{path}' is a file, not a directory; use read_file to read it")
        entries = await asyncio.to_thread(self._list, target, recursive)
        if not entries:
            return f"Directory '{path}' is empty."
        return _capped_listing(entries, self.max_entries, "entries")

    def _list(self, target: Path, recursive: bool) -> list[str]:
        if not recursive:
            with os.scandir(target) as it:
                return sorted(
                    e.name + "/" if e.is_dir() else e.name
                    for e in it
                    if not (e.is_dir() and is_noise_dir(e.name))
                )
        entries: list[str] = []
        # followlinks=False: a symlinked folder is listed but never walked into.
        for dirpath, dirnames, filenames in os.walk(target, followlinks=False):
            rel = Path(dirpath).relative_to(target)
            dirnames[:] = [d for d in dirnames if not is_noise_dir(d)]
            entries.extend((rel / d).as_posix() + "/" for d in dirnames)
            entries.extend((rel / f).as_posix() for f in filenames)
        return sorted(entries)


def _capped_listing(entries: list[str], cap: int, noun: str) -> str:
    text = "\n".join(entries[:cap])
    if len(entries) > cap:
        text += f"\n\n[{len(entries) - cap} more {noun} not shown; showing the first {cap}.]"
    return text


class GlobTool(_WorkspaceTool):
    name = "glob"
    description = (
        "Find files by name pattern, e.g. '**/*.py' (any depth) or 'src/*.js'. Matches are "
        "relative to path (default: the workspace root), sorted; folders end with '/'."
    )
    parameters = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Glob pattern; ** matches any depth."},
            "path": {"type": "string", "description": "Base directory (default: the root)."},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }

    def __init__(self, workspace: Workspace, *, max_results: int = MAX_LIST_ENTRIES) -> None:
        super().__init__(workspace)
        self.max_results = max_results

    async def execute(self, ctx: ToolContext, /, **kwargs: Any) -> str:
        pattern: str = kwargs["pattern"].strip()
        path: str = kwargs.get("path") or "."
        if not pattern:
            raise ToolError("pattern must not be empty")
        if pattern.startswith(("/", "~")):
            raise ToolError("pattern must be relative; put the base directory in 'path'")
        fence = self.fence(ctx)
        base = fence.resolve(path)
        if not base.is_dir():
            raise ToolError(f"directory not found: {path}")
        matches = await asyncio.to_thread(self._glob, fence, base, pattern)
        if not matches:
            return f"No files match '{pattern}' under '{path}'."
        return _capped_listing(matches, self.max_results, "matches")

    def _glob(self, fence: Workspace, base: Path, pattern: str) -> list[str]:
        pattern = pattern.removeprefix("./").rstrip("/") or "*"
        matcher = wcglob.compile(pattern, flags=GLOB_FLAGS)
        segments = pattern.split("/")
        # Without ** a pattern can't match deeper than its own segment count.
        max_depth = None if "**" in pattern else len(segments)
        # A noise folder the pattern names explicitly (".git/*") is searched after all.
        wanted = set(segments)
        matches: list[str] = []
        for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
            rel = Path(dirpath).relative_to(base)
            dirnames[:] = [d for d in dirnames if d in wanted or not is_noise_dir(d)]
            for name, is_dir in [(d, True) for d in dirnames] + [(f, False) for f in filenames]:
                relpath = (rel / name).as_posix()
                if not matcher.match(relpath):
                    continue
                # Links are never walked into, so only a link itself may point outside.
                entry = Path(dirpath) / name
                if entry.is_symlink() and not fence.allows(entry):
                    continue
                matches.append(relpath + "/" if is_dir else relpath)
            if max_depth is not None and len(rel.parts) + 1 >= max_depth:
                dirnames.clear()
        return sorted(matches)
