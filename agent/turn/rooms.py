"""Where a turn works and what it remembers: its room, decided once when the turn starts.

A personal chat's turn works in its person's folder (`<workspace>/users/<name>/`) and
remembers what that person taught it. A team chat's turn works in the team's folder
(`<workspace>/teams/<slug>/`), reads the team's bootstrap files and skills after the
operator's, and keeps the team's memory, whichever member sent the message: the sender's
own folder and memory are out of its reach, as the team's are out of a personal chat's,
unless the operator lets personal chats read their teams' files too
(`AGENT_TEAM_FILES_IN_PERSONAL_CHATS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth.models import User

from agent.conf import AgentSettings
from agent.tools.guards.folders import team_folder, user_folder
from agent.turn.db import on_db
from sessions_app.models import Session

TEAM_HIDDEN_TOOLS = frozenset({"cron"})


@dataclass(frozen=True, slots=True)
class Room:
    folder: Path
    # The team whose chat it is (its group's id and slug); None for a personal chat.
    team_id: int | None = None
    team: str | None = None
    # Team folders whose bootstrap files and skills a personal chat reads as well.
    shared: tuple[Path, ...] = ()

    @property
    def hidden_tools(self) -> frozenset[str]:
        """A team chat schedules no jobs: a job runs later as the member who made it, in
        their own folder, which a team's conversation must not reach."""
        return TEAM_HIDDEN_TOOLS if self.team_id is not None else frozenset()

    @property
    def whose(self) -> str:
        """How the prompt names the folder's own bootstrap files."""
        return f"the team {self.team}'s" if self.team else "the user's own"


async def room_of(session: Session, owner: User | None, conf: AgentSettings) -> Room:
    """The room of a turn of `session` sent by `owner`. A personal chat's is known without
    the database, unless its person's teams' folders are to be read too."""
    if session.team_id is None and (owner is None or not conf.team_files_in_personal_chats):
        return Room(user_folder(conf.workspace, owner.get_username() if owner else None))
    return await _room_from_db(session, owner, conf)


@on_db
def _room_from_db(session: Session, owner: User | None, conf: AgentSettings) -> Room:
    if session.team_id is not None:
        slug = session.team.name if session.team else ""
        return Room(team_folder(conf.workspace, slug), team_id=session.team_id, team=slug)
    assert owner is not None  # `room_of` answers for a turn of no one
    folder = user_folder(conf.workspace, owner.get_username())
    slugs = owner.groups.filter(team__isnull=False).order_by("name").values_list("name", flat=True)
    shared = tuple(
        path for path in (team_folder(conf.workspace, slug) for slug in slugs) if path.is_dir()
    )
    return Room(folder, shared=shared)
