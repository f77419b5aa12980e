"""The model field that holds a list of tool names or globs (`agent.tool_patterns`), as
sessions, runs, users' preferences, cron jobs and skills all store one.

Kept apart from `agent.tool_patterns`, which stays plain Python for the parts that run
without Django.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import models

from agent import tool_patterns


def validate_tool_patterns(value: Any) -> None:
    """A list of tool names or globs (`exec`, `mcp_*`)."""
    found = tool_patterns.problems(value)
    if found:
        raise ValidationError(found)


def tool_patterns_field(*, help_text: str) -> models.JSONField[Any]:
    """A list of tool names or globs, empty unless set, checked by `validate_tool_patterns`."""
    return models.JSONField(
        default=list, blank=True, validators=[validate_tool_patterns], help_text=help_text
    )
