"""Removing a user's prompt files while their agent swaps what is at the name, or a folder on
the way, for a link to another user's (with `exec`, at any moment): whatever the timing,
the removal takes what is in the user's own folder (a link as a link) and never anything
the link points at. A thread swaps for real, many times over."""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from agent import openat
from agent.tools.guards.folders import make_user_folder
from skills_app.services import delete_own_file, delete_own_skill

SECONDS = 2.0
BOBS = "bob's own"


@pytest.fixture(autouse=True)
def _interleave_often() -> Iterator[None]:
    """Switch threads far more often than Python's default, so that the swapping thread
    runs between a removal's look and its act, as it would on a busy server."""
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
    (folder / "skills" / "mine").mkdir(parents=True)
    (folder / "skills" / "mine" / "SKILL.md").write_text(f"---\ndescription: x\n---\n{BOBS}")
    return folder


def bobs_files_are_whole(bob: Path) -> None:
    assert (bob / "AGENTS.md").read_text() == BOBS
    assert (bob / "skills" / "mine" / "SKILL.md").read_text().endswith(BOBS)


@contextmanager
def churning(place: Path, make: Callable[[Path], object], link_to: Path) -> Iterator[None]:
    """A thread keeps putting at `place` a plain file or folder (made by `make`) or a link
    to `link_to`, whatever was there (or removed) before, until the block ends."""
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            with suppress(OSError):
                if place.is_symlink():
                    place.unlink()
                    make(place)
                elif place.exists():
                    shutil.rmtree(place) if place.is_dir() else place.unlink()
                    place.symlink_to(link_to)
                else:
                    make(place)

    thread = threading.Thread(target=churn, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)


def removing_for_a_while(remove: Callable[[], object]) -> int:
    """Call `remove` again and again for a while; how many times it removed something."""
    removed = 0
    deadline = time.monotonic() + SECONDS
    while time.monotonic() < deadline:
        with suppress(OSError):  # a 409 on the API: changed meanwhile, or a link on the way
            removed += bool(remove())
    return removed


def skill_folder(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / "SKILL.md").write_text("---\ndescription: alice's\n---\nalice's")
    (path / "notes.md").write_text("alice's")


def test_a_skill_removal_never_reaches_through_a_link_at_its_name(alice: Path, bob: Path) -> None:
    (alice / "skills").mkdir()
    with churning(alice / "skills" / "mine", skill_folder, bob / "skills" / "mine"):
        removed = removing_for_a_while(lambda: delete_own_skill(folder=alice, name="mine"))
    assert removed > 0
    bobs_files_are_whole(bob)


def test_a_skill_removal_never_reaches_through_a_link_on_the_way(alice: Path, bob: Path) -> None:
    def skills(path: Path) -> None:
        skill_folder(path / "mine")

    with churning(alice / "skills", skills, bob / "skills"):
        removed = removing_for_a_while(lambda: delete_own_skill(folder=alice, name="mine"))
    assert removed > 0
    bobs_files_are_whole(bob)


def test_a_bootstrap_file_removal_never_reaches_through_a_link(alice: Path, bob: Path) -> None:
    with churning(alice / "AGENTS.md", lambda p: p.write_text("alice's"), bob / "AGENTS.md"):
        removed = removing_for_a_while(lambda: delete_own_file(folder=alice, name="AGENTS.md"))
    assert removed > 0
    bobs_files_are_whole(bob)


def test_links_inside_a_skill_folder_go_as_links(alice: Path, bob: Path) -> None:
    skill_folder(alice / "skills" / "mine")
    os.symlink(bob, alice / "skills" / "mine" / "bobs-folder")
    os.symlink(bob / "AGENTS.md", alice / "skills" / "mine" / "bobs-file")
    (alice / "skills" / "mine" / "deeper").mkdir()
    os.symlink(bob / "skills", alice / "skills" / "mine" / "deeper" / "bobs-skills")

    assert delete_own_skill(folder=alice, name="mine") == 1
    assert not (alice / "skills" / "mine").exists()
    bobs_files_are_whole(bob)


def test_a_link_in_place_of_skills_is_reported_not_followed(alice: Path, bob: Path) -> None:
    os.symlink(bob / "skills", alice / "skills")
    with pytest.raises(openat.LinkFound):
        delete_own_skill(folder=alice, name="mine")
    bobs_files_are_whole(bob)
