"""The context the model sees: the system prompt and the current user message.

The system prompt holds only what stays the same from turn to turn (identity, workspace,
bootstrap files), so providers can cache it with the history that follows. The clock, which
changes every turn, rides on the newest user message instead.
"""

from __future__ import annotations

import logging
import platform
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

logger = logging.getLogger(__name__)

BOOTSTRAP_FILES = ("AGENTS.md", "SOUL.md", "USER.md", "TOOLS.md", "IDENTITY.md")
BOOTSTRAP_FILE_LIMIT = 20_000
MEMORY_SECTION_CHARS = 12_000

IDENTITY = """\
You are agentsite, a capable assistant that gets things done with tools.

- Use the tools to look before you act, and check your work after.
- When a tool answers with an error, read it and try another way; do not repeat the same call.
- Keep answers short and concrete. Use Markdown when it helps.
- Say so plainly when you cannot do something."""


def system_prompt(
    *, workspace: Path, tool_names: Iterable[str], sections: Iterable[str] = ()
) -> str:
    parts = [
        IDENTITY,
        "## Runtime\n"
        f"- Operating system: {platform.system()} {platform.release()} "
        f"(Python {platform.python_version()})\n"
        f"- Workspace: {workspace} (relative paths in tools resolve here)\n"
        f"- Tools: {', '.join(sorted(tool_names)) or 'none'}",
    ]
    parts.extend(_bootstrap_sections(workspace))
    parts.extend(section for section in sections if section)
    return "\n\n".join(parts)


def _bootstrap_sections(workspace: Path) -> list[str]:
    sections = []
    for name in BOOTSTRAP_FILES:
        path = workspace / name
        try:
            text = path.read_text(encoding="utf-8", errors="replace").strip()
        except FileNotFoundError:
            continue
        except OSError as exc:
            logger.warning("cannot read %s: %s", path, exc)
            continue
        if len(text) > BOOTSTRAP_FILE_LIMIT:
            text = (
                text[:BOOTSTRAP_FILE_LIMIT]
                + f"\n\n[… {name} cut at {BOOTSTRAP_FILE_LIMIT} characters]"
            )
        if text:
            sections.append(f"## {name}\n\n{text}")
    return sections


def user_message(content: str, *, now: datetime) -> dict[str, Any]:
    """The newest message as sent to the model, with the clock in front of it."""
    stamp = now.strftime("%A %Y-%m-%d %H:%M %Z").strip()
    return {"role": "user", "content": f"[Current time: {stamp}]\n\n{content}"}


def compose_prompt(prompt: str, context: str | None) -> str:
    """A task's prompt with the caller's extra context (API `context`) below it."""
    if not context or not context.strip():
        return prompt
    return f"{prompt}\n\n## Context\n\n{context}"


def memory_sections(*, long_term: str, summary: str) -> list[str]:
    """What the agent remembers: across sessions, and of this one's earlier history. Each
    is capped: a plain archive (a consolidation that failed) can be long."""
    sections = []
    if long_term.strip():
        sections.append(f"## Memory\n\n{_capped(long_term.strip(), 'memory')}")
    if summary.strip():
        sections.append(f"## Earlier in this conversation\n\n{_capped(summary.strip(), 'summary')}")
    return sections


def _capped(text: str, what: str) -> str:
    if len(text) <= MEMORY_SECTION_CHARS:
        return text
    return text[-MEMORY_SECTION_CHARS:] + f"\n\n[… the start of this {what} is left out]"


class OfferedSkill(Protocol):
    """What the prompt shows of a skill (`skills_app.entries.SkillEntry`)."""

    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def content(self) -> str: ...
    @property
    def always(self) -> bool: ...
    @property
    def missing(self) -> tuple[str, ...]: ...


def skills_sections(skills: Sequence[OfferedSkill]) -> list[str]:
    """Always-skills in full; the others listed by name, description and availability,
    for the model to read (`read_skill`) when one applies."""
    sections = [f"## Skill: {skill.name}\n\n{skill.content}" for skill in skills if skill.always]
    listed = [skill for skill in skills if not skill.always]
    if listed:
        lines = [
            "## Skills",
            "",
            "Before a task one of these covers, read it in full with `read_skill`.",
            "",
        ]
        for skill in listed:
            state = "" if not skill.missing else f" (unavailable: needs {', '.join(skill.missing)})"
            lines.append(f"- {skill.name}{state}: {skill.description or 'no description'}")
        sections.append("\n".join(lines))
    return sections
