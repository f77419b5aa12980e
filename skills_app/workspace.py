"""Skills kept as files: `<workspace>/skills/<name>/SKILL.md`, with YAML frontmatter.

---
name: weather
description: Current weather and forecasts for a place.
always: false
requires:
  bins: [curl]
  env: [WEATHER_API_KEY]
---
How to use it...
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from skills_app.entries import SkillEntry

logger = logging.getLogger(__name__)

SKILL_FILE = "SKILL.md"
_FRONTMATTER = re.compile(r"\A---\s*\n(.*?)\n---\s*(?:\n|\Z)", re.DOTALL)
NAME = re.compile(r"^[-a-zA-Z0-9_]{1,64}$")


def workspace_skills(workspace: Path) -> list[SkillEntry]:
    """Every readable skill file of the workspace, by folder name order."""
    folder = workspace / "skills"
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.glob(f"*/{SKILL_FILE}")):
        entry = read_skill_file(path)
        if entry is not None:
            found.append(entry)
    return found


def read_skill_file(path: Path) -> SkillEntry | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        logger.warning("cannot read the skill %s: %s", path, exc)
        return None
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
    )


def _strings(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list):
        return tuple(str(item) for item in value)
    return ()
