"""File tools: read, write, edit, append, list and glob inside the workspace fence."""

from __future__ import annotations

import asyncio
import io
import os
import stat
from pathlib import Path
from typing import Any

from agent.tools.base import Tool, ToolContext, ToolError
from agent.tools.filetext import iter_lines, looks_binary, whitespace_hint
from agent.tools.guards import Workspace, is_noise_dir

DEFAULT_READ_LINES = 2000
MAX_READ_CHARS = 100_000
# Above this size the total line count isn't worth a full scan just for a footer.
COUNT_LINES_UP_TO_BYTES = 5 * 1024 * 1024
BINARY_SNIFF_BYTES = 8192
MAX_LIST_ENTRIES = 500


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
        return target


def _put(fence: Workspace, target: Path, path: str, data: bytes, flags: int) -> None:
    """Write `data` to the file `target`, made with its folders when missing; through one
    descriptor walked from the fence's root, so never into a link swapped in meanwhile."""
    fd = fence.open(target, os.O_WRONLY | os.O_CREAT | flags, shown=path, make=True)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


class ReadFileTool(_WorkspaceTool):
    name = "read_file"
    parallel_safe = True
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
        fence = self.fence(ctx)
        target = self._existing_file(fence, path)
        return await asyncio.to_thread(self._read, fence, target, path, offset, limit)

    def _read(self, fence: Workspace, target: Path, path: str, offset: int, limit: int) -> str:
        # Not blocking: a named pipe swapped in would hold the reader forever.
        with os.fdopen(fence.open(target, os.O_RDONLY | os.O_NONBLOCK, shown=path), "rb") as raw:
            return self._lines(raw, path, offset, limit)

    def _lines(self, raw: io.BufferedReader, path: str, offset: int, limit: int) -> str:
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


class _PutFileTool(_WorkspaceTool):
    """write_file and append_file, alike but for what becomes of the file's old content:
    `flag` cuts it (`os.O_TRUNC`) or keeps it (`os.O_APPEND`); `done` is the answer's verb."""

    flag: int
    done: str

    @staticmethod
    def schema(content: str) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace."},
                "content": {"type": "string", "description": content},
            },
            "required": ["path", "content"],
            "additionalProperties": False,
        }

    async def execute(self, ctx: ToolContext, /, **kwargs: Any) -> str:
        path: str = kwargs["path"]
        data = kwargs["content"].encode("utf-8")
        fence = self.fence(ctx)
        target = self._writable_file(fence, path)
        await asyncio.to_thread(_put, fence, target, path, data, self.flag)
        return f"{self.done} {len(data)} bytes to {path}"


class WriteFileTool(_PutFileTool):
    name = "write_file"
    description = (
        "Create or overwrite a file in the workspace with the given content (UTF-8). "
        "Parent folders are created as needed."
    )
    parameters = _PutFileTool.schema("The full new content of the file.")
    flag = os.O_TRUNC
    done = "Wrote"


class AppendFileTool(_PutFileTool):
    name = "append_file"
    description = (
        "Append content to the end of a file in the workspace; the file (and its folders) "
        "is created if missing. Include a leading newline yourself if one is needed."
    )
    parameters = _PutFileTool.schema("Text to append.")
    flag = os.O_APPEND
    done = "Appended"


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
        fence = self.fence(ctx)
        target = self._existing_file(fence, path)
        return await asyncio.to_thread(self._edit, fence, target, path, old, new, replace_all)

    def _edit(
        self, fence: Workspace, target: Path, path: str, old: str, new: str, every: bool
    ) -> str:
        # Read and written through one descriptor: the file checked is the file changed.
        with os.fdopen(fence.open(target, os.O_RDWR | os.O_NONBLOCK, shown=path), "r+b") as fh:
            return self._replace(fh, path, old, new, every)

    def _replace(self, fh: io.BufferedRandom, path: str, old: str, new: str, every: bool) -> str:
        try:
            content = fh.read().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ToolError(f"'{path}' is not a UTF-8 text file") from exc

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
        fh.seek(0)
        fh.truncate()
        fh.write(updated.encode("utf-8"))
        done = count if every else 1
        return f"Replaced {done} occurrence{'s' if done != 1 else ''} in {path}"


class ListDirTool(_WorkspaceTool):
    name = "list_dir"
    parallel_safe = True
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
        entries = await asyncio.to_thread(self._list, self.fence(ctx), target, path, recursive)
        if not entries:
            return f"Directory '{path}' is empty."
        return _capped_listing(entries, self.max_entries, "entries")

    def _list(self, fence: Workspace, target: Path, path: str, recursive: bool) -> list[str]:
        fd = fence.open_dir(target, shown=path)
        try:
            return self._entries(fd, recursive)
        finally:
            os.close(fd)

    def _entries(self, fd: int, recursive: bool) -> list[str]:
        if not recursive:
            with os.scandir(fd) as it:
                return sorted(
                    e.name + "/" if e.is_dir() else e.name
                    for e in it
                    if not (e.is_dir() and is_noise_dir(e.name))
                )
        entries: list[str] = []
        # By descriptors from the folder, never through a link (one listed is not walked into)
        for dirpath, dirnames, filenames, _ in os.fwalk(".", dir_fd=fd):
            rel = Path(dirpath)
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
    parallel_safe = True
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
        matches = await asyncio.to_thread(self._glob, fence, base, path, pattern)
        if not matches:
            return f"No files match '{pattern}' under '{path}'."
        return _capped_listing(matches, self.max_results, "matches")

    def _glob(self, fence: Workspace, base: Path, path: str, pattern: str) -> list[str]:
        fd = fence.open_dir(base, shown=path)
        try:
            return self._matches(fence, base, fd, pattern)
        finally:
            os.close(fd)

    def _matches(self, fence: Workspace, base: Path, fd: int, pattern: str) -> list[str]:
        pattern = pattern.removeprefix("./").rstrip("/") or "*"
        # wcmatch takes ~8 ms to import: paid by the first glob, not by every process.
        from wcmatch import glob as wcglob

        # "*", "?" and [...] stop at "/"; a "**" segment spans any depth, none included;
        # dot-files match like other names; case always counts. Braces, extglobs and a
        # leading "!" are literal.
        flags = wcglob.GLOBSTAR | wcglob.DOTMATCH | wcglob.CASE | wcglob.FORCEUNIX
        matcher = wcglob.compile(pattern, flags=flags)
        segments = pattern.split("/")
        # Without ** a pattern can't match deeper than its own segment count.
        max_depth = None if "**" in pattern else len(segments)
        # A noise folder the pattern names explicitly (".git/*") is searched after all.
        wanted = set(segments)
        matches: list[str] = []
        for dirpath, dirnames, filenames, dir_fd in os.fwalk(".", dir_fd=fd):
            rel = Path(dirpath)
            dirnames[:] = [d for d in dirnames if d in wanted or not is_noise_dir(d)]
            for name, is_dir in [(d, True) for d in dirnames] + [(f, False) for f in filenames]:
                relpath = (rel / name).as_posix()
                if not matcher.match(relpath):
                    continue
                # Links are never walked into, so only a link itself may point outside.
                if _is_link(name, dir_fd) and not fence.allows(base / rel / name):
                    continue
                matches.append(relpath + "/" if is_dir else relpath)
            if max_depth is not None and len(rel.parts) + 1 >= max_depth:
                dirnames.clear()
        return sorted(matches)


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except FileNotFoundError:  # gone meanwhile
        return False
