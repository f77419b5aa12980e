"""Writes to skills. Keyword-only, one transaction each."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from skills_app.models import Skill


@transaction.atomic
def create_skill(
    *, name: str, description: str, content: str, always: bool = False, enabled: bool = True
) -> Skill:
    return Skill.objects.create(
        name=name, description=description, content=content, always=always, enabled=enabled
    )


@transaction.atomic
def update_skill(*, skill: Skill, **fields: Any) -> Skill:
    for name, value in fields.items():
        setattr(skill, name, value)
    skill.save()
    return skill


def delete_skill(*, skill: Skill) -> None:
    skill.delete()
