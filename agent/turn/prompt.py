"""The system message a turn's model reads: a sub-agent's own short prompt, or the agent's
with what is remembered of its user and this conversation, the skills it is offered and the
client's instructions. A turn that talks to the model alone (no tools) sends only the
client's instructions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent import context
from agent.conf import AgentSettings
from agent.turn import store
from agent.turn.options import TurnOptions
from agent.turn.profiles import Profile
from sessions_app.models import Session
from skills_app.entries import SkillEntry


def instructions_message(options: TurnOptions) -> dict[str, Any] | None:
    text = options.instructions
    return {"role": "system", "content": text} if text.strip() else None


async def system_prompt(
    *,
    conf: AgentSettings,
    profile: Profile,
    session: Session,
    owner_id: int | None,
    folder: Path,
    options: TurnOptions,
    tool_names: list[str],
    skills: list[SkillEntry],
) -> str:
    if profile.subagent:
        return context.subagent_prompt(workspace=folder, tool_names=tool_names)
    remembered = await store.long_term_memory(owner_id=owner_id)
    # The summary is of the stored history, which a client that sends its own does not
    # continue.
    summary = await store.latest_summary(session_id=session.pk) if options.history is None else ""
    return context.system_prompt(
        workspace=conf.workspace,
        folder=folder,
        tool_names=tool_names,
        sections=[
            *context.memory_sections(long_term=remembered, summary=summary),
            *context.skills_sections(skills),
            context.client_instructions(options.instructions),
        ],
    )
