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

from skills_app.workspace import read_plain_file

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
    *,
    workspace: Path,
    tool_names: Iterable[str],
    sections: Iterable[str] = (),
    folder: Path | None = None,
    whose: str = "the user's own",
    shared: Iterable[Path] = (),
) -> str:
    """The prompt of a turn that works in `folder`: the bootstrap files of the
    `workspace`'s root, which the operator keeps for everyone, then those of the `shared`
    team folders, then the folder's own (`whose`: the user's, or a team chat's team's)."""
    parts = [
        IDENTITY,
        "## Runtime\n"
        f"- Operating system: {platform.system()} {platform.release()} "
        f"(Python {platform.python_version()})\n"
        f"- Workspace: {folder or workspace} (relative paths in tools resolve here)\n"
        f"- Tools: {', '.join(sorted(tool_names)) or 'none'}",
    ]
    parts.extend(_bootstrap_sections(workspace))
    for team in shared:
        parts.extend(_bootstrap_sections(team, note=f" (the team {team.name}'s)", fenced=True))
    if folder is not None and folder != workspace:
        parts.extend(_bootstrap_sections(folder, note=f" ({whose})", fenced=True))
    parts.extend(section for section in sections if section)
    return "\n\n".join(parts)


SUBAGENT_IDENTITY = """\
You are a sub-agent of agentsite, started by the main agent for one task.

- Do that task and nothing else; you have no conversation to follow and no one to ask.
- Use the tools to look before you act, and check your work after.
- When a tool answers with an error, read it and try another way.
- End with a short report of what you did and found: the main agent reads it, not a user."""


def subagent_prompt(*, workspace: Path, tool_names: Iterable[str]) -> str:
    """The system prompt of a sub-agent: its task comes as the user message."""
    return "\n\n".join(
        [
            SUBAGENT_IDENTITY,
            "## Runtime\n"
            f"- Workspace: {workspace} (relative paths in tools resolve here)\n"
            f"- Tools: {', '.join(sorted(tool_names)) or 'none'}",
        ]
    )


def announcement(*, label: str, task: str, status: str, result: str) -> str:
    """What a session is told when a sub-agent it started has ended."""
    outcome = {
        "succeeded": "finished",
        "failed": "failed",
        "cancelled": "was stopped",
    }.get(status, status)
    return (
        f"[The sub-agent '{label}' {outcome}.]\n\n"
        f"Task: {task}\n\n"
        f"Result:\n{result or '(no answer)'}\n\n"
        "Tell the user about it in a sentence or two, in your own words; do not mention "
        "sub-agents or ids unless asked."
    )


HEARTBEAT_OK = "HEARTBEAT_OK"
# Each user's own list of what the heartbeat looks at, in their folder.
HEARTBEAT_FILE = "HEARTBEAT.md"


def heartbeat_message(tasks: str) -> str:
    """The heartbeat's prompt, with the open tasks of HEARTBEAT.md."""
    return (
        "This is a periodic heartbeat, not a message from the user. Here are the open tasks "
        "of HEARTBEAT.md in the workspace:\n\n"
        f"{tasks}\n\n"
        "Do what is due now. If something is worth telling the user, answer with that "
        f"message alone; if nothing is, answer exactly {HEARTBEAT_OK}."
    )


def open_tasks(text: str) -> str:
    """The lines of a HEARTBEAT.md that ask for something: not headings, comments, blank
    lines or ticked boxes. Empty when there is nothing to do (no model call then)."""
    kept = []
    in_comment = False
    for line in text.splitlines():
        stripped = line.strip()
        if in_comment:
            in_comment = "-->" not in stripped
            continue
        if stripped.startswith("<!--"):
            in_comment = "-->" not in stripped
            continue
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.lower().startswith(("- [x]", "* [x]")) or stripped in (
            "- [ ]",
            "* [ ]",
            "-",
            "*",
        ):
            continue
        kept.append(line.rstrip())
    return "\n".join(kept)


def _bootstrap_sections(folder: Path, *, note: str = "", fenced: bool = False) -> list[str]:
    sections = []
    for name in BOOTSTRAP_FILES:
        # A link the user's agent made there to another user's file must not bring that
        # file into the prompt, which the server reads unfenced.
        text = read_plain_file(
            folder / name, BOOTSTRAP_FILE_LIMIT + 1, inside=folder if fenced else None
        )
        if text is None:
            continue
        text = text.strip()
        if len(text) > BOOTSTRAP_FILE_LIMIT:
            text = (
                text[:BOOTSTRAP_FILE_LIMIT]
                + f"\n\n[… {name} cut at {BOOTSTRAP_FILE_LIMIT} characters]"
            )
        if text:
            sections.append(f"## {name}{note}\n\n{text}")
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


def client_instructions(text: str) -> str:
    """The section of a client's own instructions (an OpenAI client's system messages),
    last in the prompt: they shape the answer, within what the agent is."""
    if not text.strip():
        return ""
    return f"## Instructions from the client\n\n{text.strip()}"


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
