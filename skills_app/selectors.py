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


def offered_skills(*, workspace: Path, environment: Mapping[str, str]) -> list[SkillEntry]:
    """The enabled skills the agent is offered, by name, each checked against what
    commands run with (`environment`)."""
    entries = {entry.name: entry for entry in workspace_skills(workspace)}
    for skill in Skill.objects.all():
        if skill.enabled:
            entries[skill.name] = SkillEntry(
                name=skill.name,
                description=skill.description,
                content=skill.content,
                always=skill.always,
            )
        else:  # switched off in the database: a file of the same name stays off too
            entries.pop(skill.name, None)
    return [entries[name].checked(environment) for name in sorted(entries)]
