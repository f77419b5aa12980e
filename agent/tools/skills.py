"""`read_skill`: a skill's instructions in full, by name."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agent.tools.base import Tool, ToolContext, ToolError


class ReadSkillTool(Tool):
    name = "read_skill"
    parallel_safe = True
    description = (
        "Read a skill (instructions for a kind of task) in full, by its name from the Skills "
        "list of the system prompt."
    )
    parameters = {
        "type": "object",
        "properties": {"name": {"type": "string", "description": "The skill's name."}},
        "required": ["name"],
        "additionalProperties": False,
    }

    def __init__(self, workspace: Path, environment: Mapping[str, str]) -> None:
        self.workspace = workspace
        self.environment = dict(environment)

    async def execute(self, ctx: ToolContext, /, **kwargs: Any) -> str:
        # The data layer loads with the first call: this module is imported by processes
        # (sandbox tests, scripts) that never set Django up.
        from asgiref.sync import sync_to_async

        from skills_app.selectors import offered_skills

        name = kwargs["name"].strip()
        skills = await sync_to_async(offered_skills)(
            workspace=self.workspace,
            environment=self.environment,
            folder=ctx.workspace.root if ctx.workspace is not None else None,
        )
        for skill in skills:
            if skill.name == name:
                note = (
                    ""
                    if skill.available
                    else f"[Unavailable here: needs {', '.join(skill.missing)}.]\n\n"
                )
                return note + (skill.content or "(This skill is empty.)")
        known = ", ".join(skill.name for skill in skills) or "none"
        raise ToolError(f"no skill is called '{name}'. Skills: {known}")
