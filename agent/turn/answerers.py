"""Who may answer a tool call that waits for a person.

In a person's own chat, they alone. A team chat is every member's, but a yes lets a tool
run as the member whose message started the turn, on their budget and under their policy:
that member may answer, and so may the team's admins, who answer for the team; another
member may not, whatever tab they watch it from. The sockets are told who may
(`answerable_by`), so that the card can say so.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from agent.turn.db import on_db
from agent.turn.refusals import TurnError
from sessions_app.models import Approval, Run
from sessions_app.people import display_name, person
from teams_app.models import Team


class ApprovalRefused(TurnError):
    """The call waits in a team chat for the member who sent the message, or a team admin,
    and the person who answered is neither."""

    field = "call_id"


def answerable_by(approval: Approval) -> dict[str, Any] | None:
    """Who may answer the call in a team chat, `{author: {id, name} | None, team_admins:
    true}`; None in a person's own chat. Reads the run's session and author as its loader
    left them (`sessions_app.approvals` loads both), never the database: it is called from
    async code."""
    run = approval.run
    if not Run.session.is_cached(run) or run.session.team_id is None:
        return None
    author = run.author if Run.author.is_cached(run) else None
    return {"author": person(author) if author is not None else None, "team_admins": True}


async def refuse_unless_answerer(run: Run, user: User | None) -> None:
    """`ApprovalRefused` unless `user` may answer the calls of `run` (its session loaded),
    a run of a team chat that `user` belongs to."""
    team_id = run.session.team_id
    if team_id is None:
        return
    if user is not None and (user.pk == run.author_id or await is_team_admin(user, team_id)):
        return
    if run.author_id is None:
        raise ApprovalRefused("only a team admin may answer: the member who sent it is gone")
    author = run.author if Run.author.is_cached(run) else None
    who = display_name(author) if author is not None else "the member"
    raise ApprovalRefused(f"only {who}, who sent the message, or a team admin may answer")


@on_db
def is_team_admin(user: User, team_id: int) -> bool:
    """Whether `user` administers the team whose group is `team_id`."""
    return Team.objects.filter(group_id=team_id, admins=user).exists()
