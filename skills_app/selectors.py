"""Reads of skills: the database's and the workspace's, the database winning a name."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from django.db.models import QuerySet

from skills_app.entries import SkillEntry
from skills_app.models import Skill
from skills_app.workspace import workspace_skills


def list_skills() -> QuerySet[Skill]:
    return Skill.objects.all()


def find_skill(*, name: str) -> Skill | None:
    return Skill.objects.filter(name=name).first()


def offered_skills(
    *, workspace: Path, environment: Mapping[str, str], folder: Path | None = None
) -> list[SkillEntry]:
    """The enabled skills the agent is offered, by name, each checked against what
    commands run with (`environment`): the operator's (the database's, and the files of the
    `workspace`'s root), then those of the user's own `folder` under names not taken."""
    entries: dict[str, SkillEntry | None] = {e.name: e for e in workspace_skills(workspace)}
    for skill in Skill.objects.all():
        if skill.enabled:
            entries[skill.name] = SkillEntry(
                name=skill.name,
                description=skill.description,
                content=skill.content,
                always=skill.always,
            )
        else:  # switched off in the database: a file of the same name stays off too
            entries[skill.name] = None
    if folder is not None and folder != workspace:
        # A user's skill adds to the operator's and never stands in for one of them.
        for entry in workspace_skills(folder, fenced=True):
            entries.setdefault(entry.name, entry)
    return [entry.checked(environment) for _, entry in sorted(entries.items()) if entry]
