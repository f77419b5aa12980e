"""Reads of skills: the database's and the workspace's, the database winning a name; and of
the files in a user's own folder that add to that user's prompt."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from django.db.models import QuerySet

from agent import tool_patterns
from skills_app.entries import SkillEntry
from skills_app.models import Skill
from skills_app.workspace import FileText, read_text_file, skill_files

# Whose a skill or file is: the operator's (the database, the workspace's root), for
# everyone; or the user's own, kept in their folder, for their prompt only.
OPERATOR = "operator"
YOURS = "yours"
SOURCES = (OPERATOR, YOURS)


@dataclass(frozen=True, slots=True)
class ListedSkill:
    """A skill as a user sees it listed: where it is kept and whether their prompt has it."""

    name: str
    description: str
    content: str
    always: bool
    enabled: bool
    source: str
    # The file it is kept in, relative to the workspace (the operator's) or to the user's
    # folder (theirs); None for a skill kept in the database.
    path: str | None
    # Whether the user's prompt offers it: a skill may be switched off, or lose its name
    # to an operator's skill.
    offered: bool
    created: datetime | None
    updated: datetime | None
    # Bytes of its file; None for a skill of the database.
    size: int | None = None
    skill: Skill | None = None
    # Tools that wait for a person's yes while it is offered.
    approve_tools: tuple[str, ...] = ()

    @property
    def in_database(self) -> bool:
        return self.skill is not None


@dataclass(frozen=True, slots=True)
class OwnFile:
    """A bootstrap file of the user's own folder (`AGENTS.md`, …), as their prompt reads it."""

    name: str
    text: str
    truncated: bool
    size: int
    modified: datetime

    @property
    def path(self) -> str:
        return self.name


def list_skills() -> QuerySet[Skill]:
    return Skill.objects.all()


def find_skill(*, name: str) -> Skill | None:
    return Skill.objects.filter(name=name).first()


def _winners(
    db: Iterable[Skill], root: Iterable[SkillEntry], own: Iterable[SkillEntry]
) -> dict[str, Skill | SkillEntry | None]:
    """The skill each name stands for in a prompt: the database's, or the root's file (a
    skill switched off in the database keeps a file of its name off too), then the user's
    own under names not taken, since a user's skill never stands in for an operator's."""
    chosen: dict[str, Skill | SkillEntry | None] = {entry.name: entry for entry in root}
    for skill in db:
        chosen[skill.name] = skill if skill.enabled else None
    for entry in own:
        chosen.setdefault(entry.name, entry)
    return chosen


def _own_folder(workspace: Path, folder: Path | None) -> Path | None:
    return folder if folder is not None and folder != workspace else None


def offered_skills(
    *,
    workspace: Path,
    environment: Mapping[str, str],
    folder: Path | None = None,
    shared: Sequence[Path] = (),
) -> list[SkillEntry]:
    """The enabled skills the agent is offered, by name, each checked against what
    commands run with (`environment`): the operator's (the database's, and the files of the
    `workspace`'s root), then those of the `shared` team folders and of the turn's own
    `folder` (a user's or a team chat's team's) under names not taken."""
    own_folder = _own_folder(workspace, folder)
    folders = [*shared, *([own_folder] if own_folder else [])]
    own = [entry for place in folders for entry, _ in skill_files(place, fenced=True)]
    root = [entry for entry, _ in skill_files(workspace)]
    chosen = _winners(Skill.objects.all(), root, own)
    offered = []
    for _, item in sorted(chosen.items()):
        if isinstance(item, Skill):
            item = SkillEntry(
                name=item.name,
                description=item.description,
                content=item.content,
                always=item.always,
                approve_tools=tool_patterns.parse(item.approve_tools),
            )
        if item is not None:
            offered.append(item.checked(environment))
    return offered


def listed_skill(skill: Skill) -> ListedSkill:
    """A skill of the database as it is listed (it is offered when it is enabled)."""
    return ListedSkill(
        name=skill.name,
        description=skill.description,
        content=skill.content,
        always=skill.always,
        enabled=skill.enabled,
        source=OPERATOR,
        path=None,
        offered=skill.enabled,
        created=skill.created,
        updated=skill.updated,
        skill=skill,
        approve_tools=tool_patterns.parse(skill.approve_tools),
    )


def skills_for(*, workspace: Path, folder: Path | None) -> list[ListedSkill]:
    """Every skill that may reach the prompt of the user who works in `folder`, by name,
    the operator's first: the database's, the workspace root's files (read only here),
    and the files of the user's own folder."""
    own_folder = _own_folder(workspace, folder)
    db = list(Skill.objects.all())
    root = skill_files(workspace)
    own = skill_files(own_folder, fenced=True) if own_folder else []
    chosen = _winners(db, [entry for entry, _ in root], [entry for entry, _ in own])
    listed = [listed_skill(skill) for skill in db]
    listed += [_listed_file(e, read, OPERATOR, workspace, chosen) for e, read in root]
    if own_folder is not None:
        listed += [_listed_file(e, read, YOURS, own_folder, chosen) for e, read in own]
    order = {OPERATOR: 0, YOURS: 1}
    return sorted(listed, key=lambda s: (s.name, order[s.source], not s.in_database))


def _listed_file(
    entry: SkillEntry,
    read: FileText,
    source: str,
    base: Path,
    chosen: Mapping[str, Skill | SkillEntry | None],
) -> ListedSkill:
    path = entry.path or base  # a file's entry always has its path
    return ListedSkill(
        name=entry.name,
        description=entry.description,
        content=entry.content,
        always=entry.always,
        enabled=True,
        source=source,
        path=path.relative_to(base).as_posix(),
        offered=chosen.get(entry.name) is entry,
        created=None,
        updated=read.modified,
        size=read.size,
        approve_tools=entry.approve_tools,
    )


def find_listed_skill(
    *, workspace: Path, folder: Path | None, name: str, source: str | None = None
) -> ListedSkill | None:
    """The skill `name` of that `source` as `skills_for` lists it; without a source, the
    operator's when there is one (the one a prompt uses), else the user's own."""
    found = [s for s in skills_for(workspace=workspace, folder=folder) if s.name == name]
    if source is not None:
        found = [s for s in found if s.source == source]
    return found[0] if found else None


def own_bootstrap_files(*, folder: Path, names: Iterable[str], limit: int) -> list[OwnFile]:
    """The bootstrap files of the user's own `folder` among `names`, in that order, with
    their text as far as a prompt takes it (`limit` characters). Only plain files inside
    the folder count, as only those reach the prompt."""
    files = []
    for name in names:
        read = read_text_file(folder / name, limit + 1, inside=folder)
        if read is not None:
            files.append(
                OwnFile(
                    name=name,
                    text=read.text[:limit],
                    truncated=len(read.text) > limit,
                    size=read.size,
                    modified=read.modified,
                )
            )
    return files
