"""What a team's admin, who is not staff, may change of their team beyond its policy's
ceiling: the rules the admin's team page and `PATCH /api/teams/<slug>` both keep."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from teams_app.models import Team


def team_budget_narrows(team: Team, after: Decimal | None) -> bool:
    """A team's budget stops its members' turns when spent: its admin may set one or lower
    it; raising or removing the one staff set is staff's."""
    before = team.team_daily_budget if team.pk else None
    return before is None or (after is not None and after <= before)


def assignment_problem(team: Team, field: str, rows: Iterable[Any], *, admin: Any) -> str:
    """Why a team's admin may not give `team` these MCP servers or skills (`field`), or "":
    they pick from what their teams have (assigning one of no team's would take it from
    everyone else), and may not take off a team's last one (it would become everyone's)."""
    after = set(rows)
    reachable = set(getattr(team, field).model._default_manager.filter(teams__admins=admin))
    foreign = sorted(str(row) for row in after - reachable)
    if foreign:
        return f"{', '.join(foreign)}: a team's admin picks from what their teams have"
    before = set(getattr(team, field).all()) if team.pk else set()
    orphaned = sorted(
        str(row) for row in before - after if not row.teams.exclude(pk=team.pk).exists()
    )
    if orphaned:
        return (
            f"{', '.join(orphaned)} belongs to this team alone: taken off, it would be "
            "everyone's on the site. Ask staff."
        )
    return ""
