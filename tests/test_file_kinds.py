"""The file tools open regular files and folders only: a named pipe, a socket or a device in
their place is refused at once and in plain words, whichever tool meets it and however it
got there (made before the call, or swapped in after the tool looked). A pipe's open would
otherwise wait for its other end, which may never come, holding the call's thread for good."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent import openat
from agent.tools import ToolContext, ToolRegistry, Workspace, build_registry

# A refusal comes at once; the bound is for a loaded machine, far below "never".
PROMPT = 10.0

CALLS = [
    ("read_file", {}),
    ("write_file", {"content": "x"}),
    ("append_file", {"content": "x"}),
    ("edit_file", {"old_text": "a", "new_text": "b"}),
]


@pytest.fixture
def tools(ws: Path) -> ToolRegistry:
    return build_registry(workspace=ws, exec_timeout=1)


@pytest.fixture
def open_tools(ws: Path) -> ToolRegistry:
    return build_registry(workspace=ws, restrict_to_workspace=False, exec_timeout=1)


@pytest.fixture
def unix_socket(ws: Path) -> Iterator[Path]:
    path = ws / "sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        yield path


async def run(tools: ToolRegistry, tool: str, args: dict[str, object]) -> str:
    async with asyncio.timeout(PROMPT):
        return await tools.execute(tool, args)


@pytest.mark.parametrize(("tool", "extra"), CALLS)
async def test_a_named_pipe_is_refused_at_once_by_every_file_tool(
    tools: ToolRegistry, ws: Path, tool: str, extra: dict[str, str]
) -> None:
    os.mkfifo(ws / "pipe")
    (ws / "sub").mkdir()
    os.mkfifo(ws / "sub" / "deep")

    for path in ("pipe", "sub/deep", str(ws / "pipe")):
        result = await run(tools, tool, {"path": path, **extra})
        assert result == (
            f"Error: '{path}' is a named pipe, not a regular file; "
            "file tools read and write regular files only"
        )
    assert (ws / "pipe").is_fifo()


@pytest.mark.parametrize(("tool", "extra"), CALLS)
async def test_a_socket_is_refused_by_every_file_tool(
    tools: ToolRegistry, unix_socket: Path, tool: str, extra: dict[str, str]
) -> None:
    result = await run(tools, tool, {"path": "sock", **extra})
    assert result == (
        "Error: 'sock' is a socket, not a regular file; file tools read and write regular files only"
    )


@pytest.mark.parametrize(("tool", "extra"), CALLS)
async def test_a_device_is_refused_without_the_fence_too(
    open_tools: ToolRegistry, tool: str, extra: dict[str, str]
) -> None:
    for device in ("/dev/null", "/dev/zero"):
        result = await run(open_tools, tool, {"path": device, **extra})
        assert result == (
            f"Error: '{device}' is a device, not a regular file; "
            "file tools read and write regular files only"
        )


@pytest.mark.parametrize("read_by_another", [False, True], ids=["alone", "with-a-reader"])
@pytest.mark.parametrize(("tool", "extra"), CALLS)
async def test_a_pipe_swapped_in_after_the_look_is_refused_at_once(
    tools: ToolRegistry,
    ws: Path,
    monkeypatch: pytest.MonkeyPatch,
    tool: str,
    extra: dict[str, str],
    read_by_another: bool,
) -> None:
    """The name is a plain file when it is looked at, and a pipe when it is opened: the
    open does not wait, and what the open descriptor is refuses it, even when a reader at
    the other end lets the open succeed; nothing reaches that reader."""
    (ws / "notes.md").write_text("a note")
    looked = openat._mode_at
    readers: list[int] = []

    def look_then_swap(parent_fd: int, name: str) -> int | None:
        mode = looked(parent_fd, name)
        if not readers:
            os.unlink(name, dir_fd=parent_fd)
            os.mkfifo(name, dir_fd=parent_fd)
            flags = os.O_RDONLY | os.O_NONBLOCK
            readers.append(os.open(name, flags, dir_fd=parent_fd) if read_by_another else -1)
        return mode

    monkeypatch.setattr(openat, "_mode_at", look_then_swap)
    try:
        result = await run(tools, tool, {"path": "notes.md", **extra})
        if read_by_another:
            assert os.read(readers[0], 100) == b""
    finally:
        if read_by_another:
            os.close(readers[0])
    assert result == (
        "Error: 'notes.md' is a named pipe, not a regular file; "
        "file tools read and write regular files only"
    )


async def test_folders_in_place_of_files_and_files_in_place_of_folders(
    tools: ToolRegistry, ws: Path
) -> None:
    (ws / "dir").mkdir()
    (ws / "file.txt").write_text("text")
    for tool, extra in CALLS:
        result = await run(tools, tool, {"path": "dir", **extra})
        assert result == "Error: 'dir' is a directory, not a file; use list_dir to see it"
    for tool, extra in CALLS[1:3]:
        result = await run(tools, tool, {"path": "file.txt/x", **extra})
        assert result == (
            "Error: a part of 'file.txt/x' before its last is a file, not a directory"
        ), tool
    assert (ws / "file.txt").read_text() == "text"


async def test_a_pipe_or_a_file_is_no_folder_to_list(tools: ToolRegistry, ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    (ws / "notes.md").write_text("notes")
    for tool, args in [("list_dir", {}), ("glob", {"pattern": "*"})]:
        result = await run(tools, tool, {**args, "path": "pipe"})
        assert result == "Error: 'pipe' is a named pipe, not a directory"
        result = await run(tools, tool, {**args, "path": "notes.md"})
        assert result == "Error: 'notes.md' is a file, not a directory; use read_file to read it"


async def test_a_regular_file_is_used_as_ever(tools: ToolRegistry, ws: Path) -> None:
    assert await run(tools, "write_file", {"path": "a.txt", "content": "one\n"}) == (
        "Wrote 4 bytes to a.txt"
    )
    await run(tools, "append_file", {"path": "a.txt", "content": "two\n"})
    await run(tools, "edit_file", {"path": "a.txt", "old_text": "two", "new_text": "three"})
    assert await run(tools, "read_file", {"path": "a.txt"}) == "     1\tone\n     2\tthree"
    fd = Workspace(ws).open(ws.resolve() / "a.txt", os.O_RDONLY, shown="a.txt")
    try:
        assert os.get_blocking(fd)  # the descriptor of a plain file is an ordinary one
    finally:
        os.close(fd)


async def test_a_users_folder_refuses_a_pipe_in_the_turns_context(
    tools: ToolRegistry, ws: Path
) -> None:
    folder = ws / "users" / "alice"
    folder.mkdir(parents=True)
    os.mkfifo(folder / "AGENTS.md")
    ctx = dataclasses.replace(ToolContext.detached("web"), workspace=Workspace(folder))
    async with asyncio.timeout(PROMPT):
        result = await tools.execute("write_file", {"path": "AGENTS.md", "content": "x"}, ctx)
    assert "'AGENTS.md' is a named pipe" in result
