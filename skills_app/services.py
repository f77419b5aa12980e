"""Writes to skills (keyword-only, one transaction each), and removals of the files in a
user's own folder that add to their prompt."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from typing import Any

from django.db import transaction

from agent import openat
from skills_app.models import Skill
from skills_app.workspace import NAME, skill_files

logger = logging.getLogger(__name__)


@transaction.atomic
def create_skill(
    *,
    name: str,
    description: str,
    content: str,
    always: bool = False,
    enabled: bool = True,
    approve_tools: list[str] | None = None,
) -> Skill:
    return Skill.objects.create(
        name=name,
        description=description,
        content=content,
        always=always,
        enabled=enabled,
        approve_tools=approve_tools or [],
    )


@transaction.atomic
def update_skill(*, skill: Skill, **fields: Any) -> Skill:
    for name, value in fields.items():
        setattr(skill, name, value)
    skill.save()
    return skill


def delete_skill(*, skill: Skill) -> None:
    skill.delete()


# Files of a user's own folder. The folder's agent can plant links and swap files with
# `exec` at any moment, so nothing is removed by path: the folder is walked from its top by
# descriptors without following a link (`agent.openat`), and what is at the name is removed
# as it is there: a link itself, never what it points at; a folder entry by entry, by
# descriptors, never through a link inside it.


def delete_own_skill(*, folder: Path, name: str) -> int:
    """Remove the skill `name` from the user's own `folder` (its whole `skills/<dir>/`);
    how many folders went. With no readable skill of that name, whatever else sits at
    `skills/<name>` (a link, a folder whose SKILL.md is unreadable or a link) goes instead,
    so that the user can clear what their agent left there. Raises `openat.LinkFound` when
    the folder or its `skills/` is a link."""
    files = skill_files(folder, fenced=True)
    targets = {entry.path.parent.name for entry, _ in files if entry.name == name and entry.path}
    if not targets and NAME.match(name):
        held = {entry.path.parent.name for entry, _ in files if entry.path}
        if name not in held:  # a folder that holds another skill is not this one
            targets = {name}
    removed = 0
    for target in sorted(targets):
        if _remove(folder, folder / "skills" / target, folders=True):
            logger.info("removed the skill folder skills/%s of %s", target, folder)
            removed += 1
    return removed


def delete_own_file(*, folder: Path, name: str) -> bool:
    """Remove the file (or the link, not what it points at) `name` at the top of the
    user's own `folder`; False when nothing but a folder, or nothing, is there."""
    if not name or "/" in name or name in (".", ".."):
        raise ValueError(f"{name!r} is no name of a file at the top of a folder")
    removed = _remove(folder, folder / name, folders=False)
    if removed:
        logger.info("removed %s of %s", name, folder)
    return removed


def _remove(folder: Path, target: Path, *, folders: bool) -> bool:
    try:
        with openat.opened_parent(folder, target) as (parent, name):
            try:
                facts = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                return False
            if not stat.S_ISDIR(facts.st_mode):
                os.unlink(name, dir_fd=parent)
                return True
            if not folders:
                return False
            _remove_tree(parent, name)
            return True
    except FileNotFoundError:  # no folder, or no `skills/` in it
        return False


def _remove_tree(parent: int, name: str) -> None:
    """The folder `name` of the open folder `parent` and all in it, by descriptors: a link
    inside goes as a link, and one put at a folder's name meanwhile stops the removal
    (`openat.LinkFound`) rather than being followed."""
    fd = openat.open_dir(name, parent)
    try:
        with os.scandir(fd) as entries:
            for entry in list(entries):
                if entry.is_dir(follow_symlinks=False):
                    _remove_tree(fd, entry.name)
                else:
                    os.unlink(entry.name, dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent)
