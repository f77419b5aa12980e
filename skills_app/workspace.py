"""Skills kept as files: `<workspace>/skills/<name>/SKILL.md`, with YAML frontmatter.

---
name: weather
description: Current weather and forecasts for a place.
always: false
approve_tools: [exec]
requires:
  bins: [curl]
  env: [WEATHER_API_KEY]
---
How to use it...
"""

from __future__ import annotations

import logging
import os
import re
import stat
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent import openat, tool_patterns
from skills_app.entries import SkillEntry

logger = logging.getLogger(__name__)

SKILL_FILE = "SKILL.md"
SKILL_FILE_LIMIT = 200_000
_FRONTMATTER = re.compile(r"\A---\s*\n(.*?)\n---\s*(?:\n|\Z)", re.DOTALL)
NAME = re.compile(r"^[-a-zA-Z0-9_]{1,64}$")


@dataclass(frozen=True, slots=True)
class FileText:
    """What was read of a file, with its size (bytes) and time as the open file had them."""

    text: str
    size: int
    modified: datetime


def workspace_skills(workspace: Path, *, fenced: bool = False) -> list[SkillEntry]:
    """Every readable skill file of the folder `workspace`, by folder name order; `fenced`,
    only those that are inside it (an agent works in a user's folder, and may leave links
    there)."""
    return [entry for entry, _ in skill_files(workspace, fenced=fenced)]


def skill_files(folder: Path, *, fenced: bool = False) -> list[tuple[SkillEntry, FileText]]:
    """`workspace_skills`, each with what its file was when it was read."""
    skills = folder / "skills"
    if not skills.is_dir():
        return []
    found = []
    for path in sorted(skills.glob(f"*/{SKILL_FILE}")):
        read = read_text_file(path, SKILL_FILE_LIMIT, inside=folder if fenced else None)
        entry = None if read is None else parse_skill(path, read.text)
        if entry is not None and read is not None:
            found.append((entry, read))
    return found


def read_plain_file(path: Path, limit: int, *, inside: Path | None = None) -> str | None:
    """The first `limit` characters of the text file `path`; None when it is not there or
    cannot be read, or, with `inside`, leads out of that folder through a link."""
    read = read_text_file(path, limit, inside=inside)
    return None if read is None else read.text


def read_text_file(path: Path, limit: int, *, inside: Path | None = None) -> FileText | None:
    """`read_plain_file`, with the file's size and time."""
    # Not blocking: a named pipe in place of the file would hold the reader forever.
    flags = os.O_RDONLY | os.O_NONBLOCK
    try:
        if inside is None:
            fd = os.open(path, flags)
        else:
            folder, target = inside.resolve(), path.resolve()
            if not target.is_relative_to(folder):
                logger.warning("%s leads out of %s; it is not read", path, inside)
                return None
            # Opened as resolved, by descriptors from the folder and through no link: the
            # folder's agent may swap the file for a link out of it at any moment.
            fd = openat.open_file(folder, target, flags)
        with os.fdopen(fd, encoding="utf-8", errors="replace") as fh:
            facts = os.fstat(fd)
            if not stat.S_ISREG(facts.st_mode):
                logger.warning("%s is not a plain file; it is not read", path)
                return None
            return FileText(
                text=fh.read(limit),
                size=facts.st_size,
                modified=datetime.fromtimestamp(facts.st_mtime, tz=UTC),
            )
    except FileNotFoundError:
        return None
    except openat.LinkFound:
        logger.warning("%s was changed into a link while it was opened; it is not read", path)
        return None
    except (OSError, RuntimeError) as exc:  # unreadable, a folder, a loop of links
        logger.warning("cannot read %s: %s", path, exc)
        return None


def read_skill_file(path: Path, *, inside: Path | None = None) -> SkillEntry | None:
    text = read_plain_file(path, SKILL_FILE_LIMIT, inside=inside)
    return None if text is None else parse_skill(path, text)


def parse_skill(path: Path, text: str) -> SkillEntry | None:
    """The skill that the text of the file `path` describes; None when it names none."""
    meta: dict[str, Any] = {}
    body = text
    match = _FRONTMATTER.match(text)
    if match:
        import yaml  # only when a skill file is there to read

        try:
            loaded = yaml.safe_load(match.group(1))
        except yaml.YAMLError as exc:
            logger.warning("the skill %s has unreadable frontmatter: %s", path, exc)
            return None
        meta = loaded if isinstance(loaded, dict) else {}
        body = text[match.end() :]
    name = str(meta.get("name") or path.parent.name)
    if not NAME.match(name):
        logger.warning("the skill %s has an unusable name %r", path, name)
        return None
    requires = meta.get("requires")
    if not isinstance(requires, dict):
        requires = {}
    return SkillEntry(
        name=name,
        description=str(meta.get("description") or "").strip(),
        content=body.strip(),
        always=meta.get("always") is True,
        path=path,
        bins=_strings(requires.get("bins")),
        env=_strings(requires.get("env")),
        approve_tools=tool_patterns.parse(meta.get("approve_tools")),
    )


def _strings(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list):
        return tuple(str(item) for item in value)
    return ()
