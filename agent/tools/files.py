"""File tools: read, write, edit, append, list and glob inside the workspace fence.

Every call's work on the file system (resolving the path included) runs in a thread counted
against the turn's owner (`agent.tools.blocking`), never on the event loop nor in its
shared pool; what it opens is a regular file or a folder, never a named pipe, socket or
device (`Workspace.open`), and what it lists is never looked through a link
(`agent.tools.listing`).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

from agent import openat
from agent.tools.base import Tool, ToolContext, ToolError
from agent.tools.blocking import run_blocking
from agent.tools.filetext import DEFAULT_READ_LINES, encoded, numbered_lines, replaced
from agent.tools.filetext import MAX_READ_CHARS as MAX_READ_CHARS
from agent.tools.guards import Workspace
from agent.tools.guards.fence import printable
from agent.tools.listing import NOTATION, glob_matches, listing

MAX_LIST_ENTRIES = 500
# The largest file edit_file reads whole and writes whole.
MAX_EDIT_BYTES = 10_000_000
_PATH = {"type": "string", "description": "File path, relative to the workspace."}


class _WorkspaceTool(Tool):
    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    def fence(self, ctx: ToolContext) -> Workspace:
        """Where this call may work: the turn's user's folder, else the tool's workspace."""
        return ctx.workspace or self.workspace


def _open_file(fence: Workspace, path: str, flags: int, *, make: bool = False) -> tuple[int, Path]:
    """The regular file at the model's `path`, opened with `flags` (`make`: with the
    folders on the way made), and where it is; what keeps it from being opened, in plain
    words."""
    target = fence.resolve(path)
    if path.endswith("/"):
        # Resolving drops the slash: `notes/` would be written as a file named `notes`.
        raise ToolError(f"'{path}' names a folder (it ends with '/'); give a file's path")
    try:
        return fence.open(target, flags, shown=path, make=make), target
    except FileNotFoundError:
        raise ToolError(f"file not found: {path}") from None
    except IsADirectoryError:
        raise ToolError(f"'{path}' is a directory, not a file; use list_dir to see it") from None
    except OSError as exc:
        raise ToolError(_os_problem(exc, path)) from None


def _open_folder(fence: Workspace, path: str) -> int:
    target = fence.resolve(path)
    try:
        return fence.open_dir(target, shown=path)
    except FileNotFoundError:
        raise ToolError(f"directory not found: {path}") from None
    except NotADirectoryError:
        kind = openat.kind_at(target)
        use = "; use read_file to read it" if kind == openat.REGULAR else ""
        raise ToolError(f"'{path}' is {kind}, not a directory{use}") from None
    except OSError as exc:
        raise ToolError(_os_problem(exc, path)) from None


_PROBLEMS = {
    errno.ENOTDIR: "a part of '{path}' before its last is a file, not a directory",
    errno.ENAMETOOLONG: "'{path}' has a name too long for the file system",
    errno.EACCES: "'{path}' may not be opened here (permission denied)",
    errno.EPERM: "'{path}' may not be opened here (operation not permitted)",
    errno.ENOSPC: "the disk is full; '{path}' was not written",
    errno.EDQUOT: "the disk quota is used up; '{path}' was not written",
    errno.EROFS: "'{path}' is on a read-only file system",
    errno.EEXIST: "'{path}' is in the way of a folder that was to be made there",
}


def _os_problem(exc: OSError, path: str) -> str:
    known = _PROBLEMS.get(exc.errno or 0)
    if known is not None:
        return known.format(path=path)
    return f"cannot open '{path}': {exc.strerror or type(exc).__name__}"


class ReadFileTool(_WorkspaceTool):
    name = "read_file"
    parallel_safe = True
    description = (
        "Read a text file from the workspace. Returns numbered lines (cat -n style). "
        f"Reads up to {DEFAULT_READ_LINES} lines by default; use offset (1-based line number) "
        "and limit to page through long files. Only regular files are read (not named pipes, "
        "sockets or devices)."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": _PATH,
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
        return await run_blocking(ctx, _read, self.fence(ctx), path, offset, limit)


def _read(fence: Workspace, path: str, offset: int, limit: int) -> str:
    with os.fdopen(_open_file(fence, path, os.O_RDONLY)[0], "rb") as raw:
        return numbered_lines(raw, path, offset, limit)


class _PutFileTool(_WorkspaceTool):
    """write_file and append_file, alike but for what becomes of the file's old content:
    `flag` cuts it (`os.O_TRUNC`) or keeps it (`os.O_APPEND`); `done` is the answer's verb."""

    flag: int
    done: str

    @staticmethod
    def schema(content: str) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {"path": _PATH, "content": {"type": "string", "description": content}},
            "required": ["path", "content"],
            "additionalProperties": False,
        }

    async def execute(self, ctx: ToolContext, /, **kwargs: Any) -> str:
        path: str = kwargs["path"]
        data = encoded(kwargs["content"], "content")
        target = await run_blocking(ctx, _put, self.fence(ctx), path, data, self.flag)
        if ctx.wrote is not None:
            await ctx.wrote(target)
        return f"{self.done} {len(data)} bytes to {path}"


def _put(fence: Workspace, path: str, data: bytes, flag: int) -> Path:
    """Write `data` to the file at `path`, made with its folders when missing; through one
    descriptor walked from the fence's root, so never into a link swapped in meanwhile.
    Where the file is."""
    fd, target = _open_file(fence, path, os.O_WRONLY | os.O_CREAT | flag, make=True)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return target


class WriteFileTool(_PutFileTool):
    name = "write_file"
    description = (
        "Create or overwrite a file in the workspace with the given content (UTF-8). "
        "Parent folders are created as needed. Only regular files are written."
    )
    parameters = _PutFileTool.schema("The full new content of the file.")
    flag = os.O_TRUNC
    done = "Wrote"


class AppendFileTool(_PutFileTool):
    name = "append_file"
    description = (
        "Append content to the end of a file in the workspace; the file (and its folders) "
        "is created if missing. Include a leading newline yourself if one is needed. Only "
        "regular files are written."
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
            "path": _PATH,
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
        every: bool = kwargs.get("replace_all", False)
        if not old:
            raise ToolError("old_text must not be empty; use write_file to create a file")
        encoded(new, "new_text")
        said, target = await run_blocking(ctx, _edit, self.fence(ctx), path, old, new, every)
        if ctx.wrote is not None:
            await ctx.wrote(target)
        return said


def _edit(fence: Workspace, path: str, old: str, new: str, every: bool) -> tuple[str, Path]:
    """Replace `old` with `new` in the file at `path`: what to tell the model, and where the
    file is."""
    # Read and written through one descriptor: the file checked is the file changed.
    fd, target = _open_file(fence, path, os.O_RDWR)
    with os.fdopen(fd, "r+b") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > MAX_EDIT_BYTES:
            # Read whole and written whole: a file of gigabytes would take the server's
            # memory, four of them at once more.
            raise ToolError(
                f"'{path}' is {size / 1_000_000:.1f} MB; edit_file changes files up to "
                f"{MAX_EDIT_BYTES // 1_000_000} MB: use exec (sed, for one) for larger ones"
            )
        try:
            content = fh.read().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ToolError(f"'{path}' is not a UTF-8 text file") from exc
        updated, done = replaced(content, path, old, new, every)
        fh.seek(0)
        fh.truncate()
        fh.write(updated.encode("utf-8"))
    return f"Replaced {done} occurrence{'s' if done != 1 else ''} in {path}", target


class ListDirTool(_WorkspaceTool):
    name = "list_dir"
    parallel_safe = True
    description = (
        f"List a directory in the workspace. {NOTATION} Set recursive to list everything "
        "below it. VCS folders, caches and virtualenvs are skipped."
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
        entries = await run_blocking(ctx, _list, self.fence(ctx), path, recursive)
        if not entries:
            return f"Directory '{path}' is empty."
        return _capped_listing(entries, self.max_entries, "entries")


def _list(fence: Workspace, path: str, recursive: bool) -> list[str]:
    fd = _open_folder(fence, path)
    try:
        return listing(fd, recursive=recursive)
    finally:
        os.close(fd)


def _capped_listing(entries: list[str], cap: int, noun: str) -> str:
    """The first `cap` entries, one a line, and no more than MAX_READ_CHARS characters (a
    tree of long paths is long even in 500 lines); a note says how many more there are."""
    shown: list[str] = []
    chars = 0
    for entry in entries[:cap]:
        chars += len(entry) + 1
        if shown and chars > MAX_READ_CHARS:
            break
        shown.append(entry)
    text = "\n".join(shown)
    if len(entries) > len(shown):
        text += (
            f"\n\n[{len(entries) - len(shown)} more {noun} not shown; "
            f"showing the first {len(shown)}.]"
        )
    return text


class GlobTool(_WorkspaceTool):
    name = "glob"
    parallel_safe = True
    description = (
        "Find files by name pattern, e.g. '**/*.py' (any depth) or 'src/*.js'. Matches are "
        f"relative to path (default: the workspace root), sorted. {NOTATION}"
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
        matches = await run_blocking(ctx, _glob, self.fence(ctx), path, pattern)
        if not matches:
            return f"No files match '{printable(pattern)}' under '{path}'."
        return _capped_listing(matches, self.max_results, "matches")


def _glob(fence: Workspace, path: str, pattern: str) -> list[str]:
    fd = _open_folder(fence, path)
    try:
        return glob_matches(fd, pattern)
    finally:
        os.close(fd)
