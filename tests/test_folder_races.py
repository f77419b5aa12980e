"""A user's agent can swap a file or folder of its own for a link to another user's at any
moment (`exec`, run by a parallel tool call, a sub-agent or another session of the user),
also between a file tool's check of a path and its use. Whatever the timing, what the file
tools and the readers of a user's prompt files open is the user's own: here a thread swaps
for real while they run, many times over."""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

from agent.tools import ToolContext, ToolRegistry, Workspace, build_registry
from agent.tools.guards.folders import make_user_folder
from skills_app.workspace import read_plain_file

ROUNDS = 2000
SECONDS = 3.0
BOBS = "bob's own instructions"
SECRET_NAME = "bobs-secret-name.txt"


@pytest.fixture(autouse=True)
def _interleave_often() -> Iterator[None]:
    """Switch threads far more often than Python's default, so that the swapping thread
    runs between a tool's check and its use as it would on a busy server."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


@pytest.fixture
def alice(workspace: Path) -> Path:
    return make_user_folder(workspace, "alice")


@pytest.fixture
def bob(workspace: Path) -> Path:
    folder = make_user_folder(workspace, "bob")
    (folder / "AGENTS.md").write_text(BOBS)
    (folder / SECRET_NAME).write_text("x")
    return folder


@pytest.fixture
def tools(workspace: Path) -> ToolRegistry:
    return build_registry(workspace=workspace, exec_timeout=1)


def as_user(folder: Path) -> ToolContext:
    return dataclasses.replace(ToolContext.detached("web"), workspace=Workspace(folder))


def rounds() -> Iterator[int]:
    deadline = time.monotonic() + SECONDS
    for number in range(ROUNDS):
        if time.monotonic() > deadline:
            return
        yield number


@contextmanager
def swapping(place: Path, make: Callable[[Path], None], link_to: Path) -> Iterator[None]:
    """A thread turns `place` into a link to `link_to` and back into a plain file or folder
    (made by `make`), over and over, until the block ends."""
    stop = threading.Event()
    spare, link = place.with_name(".spare"), place.with_name(".link")

    def swap() -> None:
        while not stop.is_set():
            with suppress(FileNotFoundError):
                os.unlink(link)
            os.symlink(link_to, link)
            if place.is_dir() and not place.is_symlink():
                # A folder cannot be renamed over a link, nor a link over a folder.
                os.rename(place, spare)
                os.rename(link, place)
                os.unlink(place)
                os.rename(spare, place)
            else:
                os.replace(link, place)
                make(spare)
                os.replace(spare, place)

    make(place)
    thread = threading.Thread(target=swap, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)


def plain_file(text: str) -> Callable[[Path], None]:
    return lambda path: path.write_text(text)


def plain_folder(path: Path) -> None:
    with suppress(FileExistsError):
        path.mkdir()
    (path / "mine.txt").write_text("alice's")


async def run_racing(
    tools: ToolRegistry, alice: Path, tool: str, args: dict[str, Any]
) -> list[str]:
    ctx = as_user(alice)
    return [await tools.execute(tool, args, ctx) for _ in rounds()]


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("write_file", {"path": "notes.md", "content": "PLANTED"}),
        ("append_file", {"path": "notes.md", "content": "PLANTED"}),
        ("edit_file", {"path": "notes.md", "old_text": "instructions", "new_text": "PLANTED"}),
    ],
)
async def test_a_write_never_reaches_another_users_file(
    tools: ToolRegistry, alice: Path, bob: Path, tool: str, args: dict[str, Any]
) -> None:
    with swapping(alice / "notes.md", plain_file("alice's instructions"), bob / "AGENTS.md"):
        await run_racing(tools, alice, tool, args)
    assert (bob / "AGENTS.md").read_text() == BOBS
    # Once the swapping stops, the file is alice's own again, and the tool works on it. (A
    # call of the race may have changed it after the last swap, when it was hers too.)
    (alice / "notes.md").write_text("alice's instructions")
    assert not (await tools.execute(tool, args, as_user(alice))).startswith("Error")
    assert "PLANTED" in (alice / "notes.md").read_text()


async def test_a_read_never_shows_another_users_file(
    tools: ToolRegistry, alice: Path, bob: Path
) -> None:
    tool, args = "read_file", {"path": "notes.md"}
    with swapping(alice / "notes.md", plain_file("alice's notes"), bob / "AGENTS.md"):
        results = await run_racing(tools, alice, tool, args)
    assert not [result for result in results if BOBS in result]
    assert "alice's notes" in await tools.execute(tool, args, as_user(alice))


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("list_dir", {"path": "docs"}),
        ("list_dir", {"path": ".", "recursive": True}),
        ("glob", {"pattern": "docs/*"}),
        ("glob", {"pattern": "*", "path": "docs"}),
    ],
)
async def test_a_listing_never_shows_another_users_folder(
    tools: ToolRegistry, alice: Path, bob: Path, tool: str, args: dict[str, Any]
) -> None:
    with swapping(alice / "docs", plain_folder, bob):
        results = await run_racing(tools, alice, tool, args)
    assert not [result for result in results if SECRET_NAME in result]
    assert "mine.txt" in await tools.execute(tool, args, as_user(alice))


def test_a_prompt_file_read_never_shows_another_users_file(alice: Path, bob: Path) -> None:
    with swapping(alice / "AGENTS.md", plain_file("alice's own"), bob / "AGENTS.md"):
        texts = [read_plain_file(alice / "AGENTS.md", 1000, inside=alice) for _ in rounds()]
    assert BOBS not in texts
    assert read_plain_file(alice / "AGENTS.md", 1000, inside=alice) == "alice's own"


# --- the same, at the worst moment every time ------------------------------------------


@pytest.fixture
def swapped_after_check(monkeypatch: pytest.MonkeyPatch, alice: Path, bob: Path) -> None:
    """The fence resolves a path, then `notes.md` and `docs` become links to bob's."""
    resolve = Workspace.resolve

    def resolve_then_swap(self: Workspace, path: str | Path) -> Path:
        resolved = resolve(self, path)
        (alice / "notes.md").unlink()
        (alice / "notes.md").symlink_to(bob / "AGENTS.md")
        shutil.rmtree(alice / "docs")
        (alice / "docs").symlink_to(bob, target_is_directory=True)
        return resolved

    (alice / "notes.md").write_text("alice's instructions")
    plain_folder(alice / "docs")
    monkeypatch.setattr(Workspace, "resolve", resolve_then_swap)


@pytest.mark.usefixtures("swapped_after_check")
@pytest.mark.parametrize(
    ("tool", "args", "shown"),
    [
        ("write_file", {"path": "notes.md", "content": "PLANTED"}, "notes.md"),
        ("append_file", {"path": "notes.md", "content": "PLANTED"}, "notes.md"),
        ("edit_file", {"path": "notes.md", "old_text": "own", "new_text": "X"}, "notes.md"),
        ("read_file", {"path": "notes.md"}, "notes.md"),
        ("write_file", {"path": "docs/new.md", "content": "PLANTED"}, "docs/new.md"),
        ("list_dir", {"path": "docs"}, "docs"),
        ("glob", {"pattern": "*", "path": "docs"}, "docs"),
    ],
)
async def test_a_link_swapped_in_after_the_check_is_refused(
    tools: ToolRegistry, alice: Path, bob: Path, tool: str, args: dict[str, Any], shown: str
) -> None:
    result = await tools.execute(tool, args, as_user(alice))
    assert result == (
        f"Error: path '{shown}' was changed into a link while it was being opened; "
        "links met there are not followed, only paths inside the workspace are allowed"
    )
    assert sorted(path.name for path in bob.iterdir()) == ["AGENTS.md", SECRET_NAME]
    assert (bob / "AGENTS.md").read_text() == BOBS
