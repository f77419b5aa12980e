"""The messages a turn's model reads first: the system message (a sub-agent's own short
prompt, or the agent's with what is remembered of its user and this conversation, the
skills it is offered and the client's instructions; a turn that talks to the model alone
sends only the client's instructions), and the user's message, with its files."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from agent import context
from agent.conf import AgentSettings
from agent.turn import attachments, store
from agent.turn.options import TurnOptions
from agent.turn.profiles import Profile
from agent.turn.rooms import Room
from sessions_app.models import Session
from skills_app.entries import SkillEntry


def user_message(content: str, options: TurnOptions, *, now: datetime | None) -> dict[str, Any]:
    """The new message as the model reads it: with the clock in front of it (`now`), for
    the agent; with the files the client sent inline."""
    text = context.user_message(content, now=now)["content"] if now else content
    return {"role": "user", "content": attachments.user_content(text, options.files)}


def instructions_message(options: TurnOptions) -> dict[str, Any] | None:
    text = options.instructions
    return {"role": "system", "content": text} if text.strip() else None


async def system_prompt(
    *,
    conf: AgentSettings,
    profile: Profile,
    session: Session,
    owner_id: int | None,
    room: Room,
    options: TurnOptions,
    tool_names: list[str],
    skills: list[SkillEntry],
) -> str:
    if profile.subagent:
        return context.subagent_prompt(workspace=room.folder, tool_names=tool_names)
    # A team chat remembers what its team taught it, not what its sender did elsewhere.
    if room.team_id is not None:
        remembered = await store.long_term_memory(owner_id=None, team_id=room.team_id)
    else:
        remembered = await store.long_term_memory(owner_id=owner_id)
    # The summary is of the stored history, which a client that sends its own does not
    # continue.
    summary = await store.latest_summary(session_id=session.pk) if options.history is None else ""
    return context.system_prompt(
        workspace=conf.workspace,
        folder=room.folder,
        whose=room.whose,
        shared=room.shared,
        tool_names=tool_names,
        sections=[
            *context.memory_sections(long_term=remembered, summary=summary),
            *context.skills_sections(skills),
            context.client_instructions(options.instructions),
        ],
    )
