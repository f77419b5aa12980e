"""A person's effective policy: computed here, in one place, and read by the turn.

The operator's settings are the ceiling. Each team a person is in says what its members may
have (a field left empty: the operator's setting); a person in several teams gets the union
of what they allow: every model and tool any of them allows, the most generous budget and
turn rate, the network for `exec` if any allows it, and every tool that any of them makes
wait for a yes. Staff may set a person's own policy (`PersonalPolicy`), which stands in for
what their teams say, still under the ceiling. Each part says where it came from.

Team budgets are a team's money: a person's runs count against every team they are in, and
a team whose budget is spent stops its members' turns until the next UTC day.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db.models import Exists, OuterRef

from agent.conf import AgentSettings, agent_settings
from teams_app.models import PersonalPolicy, Team

OPERATOR = "operator"
PERSONAL = "personal"
# As AGENT_TURN_RATE is written and the turn's rate limit reads it (DRF's form): a count,
# then a period named by its first letter (30/min, 500/day).
_RATE = re.compile(r"^\s*([1-9]\d*)\s*/\s*([smhd])[a-z]*\s*$", re.IGNORECASE)
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def rate_per_second(rate: str) -> float | None:
    """Turns a second that a rate such as `30/min` allows; None for no rate (empty or
    unreadable: the operator's check at start-up refuses the latter)."""
    match = _RATE.match(rate or "")
    if not match:
        return None
    count, unit = match.groups()
    return int(count) / _SECONDS[unit.lower()]


def _from(slugs: Iterable[str]) -> str:
    names = sorted(set(slugs))
    if not names:
        return OPERATOR
    return ("team:" if len(names) == 1 else "teams:") + ",".join(names)


def whose(source: str) -> str:
    """Whose rule a part of a policy is, in words for the person it applies to."""
    if source == PERSONAL:
        return "your own policy"
    if source.startswith("team:"):
        return f"your team {source[5:]}'s policy"
    if source.startswith("teams:"):
        return f"your teams' policies ({source[6:].replace(',', ', ')})"
    return "this site's settings"


@dataclass(frozen=True, slots=True)
class TeamRef:
    slug: str
    name: str
    admin: bool


@dataclass(frozen=True, slots=True)
class Policy:
    """What one person may do. `*_from`: where each part came from ("operator", "personal",
    "team:<slug>" or "teams:<a>,<b>")."""

    teams: tuple[TeamRef, ...]
    models: tuple[str, ...]
    models_from: str
    # None: every tool.
    tools: tuple[str, ...] | None
    tools_from: str
    # Each pattern that makes a tool wait for a yes, with where it came from.
    approve_tools: tuple[tuple[str, str], ...]
    member_daily_budget: Decimal | None
    member_daily_budget_from: str
    # (slug, USD a day) of each of the person's teams with a budget of its own.
    team_budgets: tuple[tuple[str, Decimal], ...]
    turn_rate: str
    turn_rate_from: str
    exec_network: bool
    exec_network_from: str
    # MCP servers and skills assigned to teams the person is not in: not theirs.
    hidden_mcp_servers: frozenset[str] = field(default_factory=frozenset)
    hidden_skills: frozenset[str] = field(default_factory=frozenset)

    @property
    def approve_patterns(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(pattern for pattern, _ in self.approve_tools))

    def allows_tool(self, name: str) -> bool:
        return self.tools is None or name in self.tools

    def tool_refusal(self, name: str) -> str:
        """Why a tool is not this person's, in words for them."""
        return f"the tool {name} is not allowed by {whose(self.tools_from)}"

    def model_refusal(self, name: str) -> str:
        listed = ", ".join(self.models) or "none"
        return (
            f"the model {name} is not available to you ({whose(self.models_from)} allows: {listed})"
        )

    def as_json(self) -> dict[str, Any]:
        """As `GET /api/me` shows it: each part as {value, source}."""

        def part(value: Any, source: str) -> dict[str, Any]:
            return {"value": value, "source": source}

        def money(amount: Decimal | None) -> float | None:
            return None if amount is None else float(amount)

        return {
            "models": part(list(self.models), self.models_from),
            "tools": part(None if self.tools is None else list(self.tools), self.tools_from),
            "approve_tools": [
                {"value": pattern, "source": source} for pattern, source in self.approve_tools
            ],
            "member_daily_budget": part(
                money(self.member_daily_budget), self.member_daily_budget_from
            ),
            "team_daily_budget": [
                {"value": float(amount), "source": f"team:{slug}"}
                for slug, amount in self.team_budgets
            ],
            "turn_rate": part(self.turn_rate, self.turn_rate_from),
            "exec_network": part(self.exec_network, self.exec_network_from),
        }


def operator_policy(conf: AgentSettings | None = None) -> Policy:
    """The policy of a turn of no one's, or of a person in no team without a policy of their
    own: the operator's settings."""
    conf = conf or agent_settings()
    budget = Decimal(str(conf.user_daily_budget)) if conf.user_daily_budget > 0 else None
    return Policy(
        teams=(),
        models=tuple(conf.models),
        models_from=OPERATOR,
        tools=None,
        tools_from=OPERATOR,
        approve_tools=tuple((pattern, OPERATOR) for pattern in conf.approve_tools),
        member_daily_budget=budget,
        member_daily_budget_from=OPERATOR,
        team_budgets=(),
        turn_rate=conf.turn_rate,
        turn_rate_from=OPERATOR,
        exec_network=conf.exec_network,
        exec_network_from=OPERATOR,
    )


def effective_policy(user: Any, conf: AgentSettings | None = None) -> Policy:
    """`user`'s policy (sync: a few queries); `user` may be a user's id. None, or an
    anonymous user: the operator's."""
    conf = conf or agent_settings()
    base = operator_policy(conf)
    # A user, or a user's id.
    user_id = user if isinstance(user, int) else getattr(user, "pk", None)
    if not user_id:
        return base
    admin_of = Team.admins.through.objects.filter(team=OuterRef("pk"), user_id=user_id)
    teams = list(
        Team.objects.filter(group__user=user_id)
        .annotate(is_admin=Exists(admin_of))
        .order_by("slug")
    )
    own = PersonalPolicy.objects.filter(user_id=user_id).first()
    refs = tuple(TeamRef(team.slug, team.name, bool(team.is_admin)) for team in teams)
    models, models_from = _models(base, teams, own)
    tools, tools_from = _tools(teams, own)
    budget, budget_from = _member_budget(base, teams)
    rate, rate_from = _rate(base, teams, own)
    network, network_from = _network(base, teams, own)
    approve = list(base.approve_tools)
    for team in teams:
        approve += [(pattern, f"team:{team.slug}") for pattern in team.approve_tools or ()]
    if own is not None:
        approve += [(pattern, PERSONAL) for pattern in own.approve_tools or ()]
    return Policy(
        teams=refs,
        models=models,
        models_from=models_from,
        tools=tools,
        tools_from=tools_from,
        approve_tools=tuple(dict.fromkeys(approve)),
        member_daily_budget=budget,
        member_daily_budget_from=budget_from,
        team_budgets=tuple(
            (team.slug, Decimal(team.team_daily_budget))
            for team in teams
            if team.team_daily_budget is not None
        ),
        turn_rate=rate,
        turn_rate_from=rate_from,
        exec_network=network,
        exec_network_from=network_from,
        hidden_mcp_servers=_hidden("mcp_app", "McpServer", user_id),
        hidden_skills=_hidden("skills_app", "Skill", user_id),
    )


@dataclass(frozen=True, slots=True)
class Budgets:
    """What a person's turns may cost a day: their own (None: no budget), and each of their
    teams' budgets as (slug, USD)."""

    member: Decimal | None
    teams: tuple[tuple[str, Decimal], ...]


def budgets_of(user_id: int, conf: AgentSettings | None = None) -> Budgets:
    """A person's budgets as `effective_policy` says them, in one query: a turn checks them
    at every door, and need not read the rest of the policy for it."""
    base = operator_policy(conf or agent_settings())
    teams = list(
        Team.objects.filter(group__user=user_id).only(
            "slug", "member_daily_budget", "team_daily_budget"
        )
    )
    return Budgets(
        member=_member_budget(base, teams)[0],
        teams=tuple(
            (team.slug, Decimal(team.team_daily_budget))
            for team in teams
            if team.team_daily_budget is not None
        ),
    )


def rate_of(user_id: int, conf: AgentSettings | None = None) -> str:
    """A person's turn rate as `effective_policy` says it, in two queries."""
    base = operator_policy(conf or agent_settings())
    teams = list(Team.objects.filter(group__user=user_id).only("slug", "turn_rate"))
    own = PersonalPolicy.objects.filter(user_id=user_id).only("turn_rate").first()
    return _rate(base, teams, own)[0]


def _models(
    base: Policy, teams: Sequence[Team], own: PersonalPolicy | None
) -> tuple[tuple[str, ...], str]:
    ceiling = base.models
    if own is not None and own.allowed_models is not None:
        return tuple(name for name in ceiling if name in own.allowed_models), PERSONAL
    saying = [team for team in teams if team.allowed_models is not None]
    if not saying or len(saying) < len(teams):
        # A team that says nothing allows what the operator allows: the union is the ceiling.
        return ceiling, OPERATOR
    allowed = {name for team in saying for name in team.allowed_models or ()}
    return tuple(name for name in ceiling if name in allowed), _from(t.slug for t in saying)


def _tools(teams: Sequence[Team], own: PersonalPolicy | None) -> tuple[tuple[str, ...] | None, str]:
    if own is not None and own.tools is not None:
        return tuple(own.tools), PERSONAL
    saying = [team for team in teams if team.tools is not None]
    if not saying or len(saying) < len(teams):
        return None, OPERATOR
    names = dict.fromkeys(name for team in saying for name in team.tools or ())
    return tuple(names), _from(team.slug for team in saying)


def _member_budget(base: Policy, teams: Sequence[Team]) -> tuple[Decimal | None, str]:
    ceiling = base.member_daily_budget
    saying = [team for team in teams if team.member_daily_budget is not None]
    if not saying or len(saying) < len(teams):
        return ceiling, OPERATOR
    most = max(Decimal(team.member_daily_budget or 0) for team in saying)
    if ceiling is not None and most >= ceiling:
        return ceiling, OPERATOR
    giving = [team.slug for team in saying if Decimal(team.member_daily_budget or 0) == most]
    return most, _from(giving)


def _rate(base: Policy, teams: Sequence[Team], own: PersonalPolicy | None) -> tuple[str, str]:
    ceiling = rate_per_second(base.turn_rate)

    def capped(rate: str, source: str) -> tuple[str, str]:
        asked = rate_per_second(rate)
        if asked is None or (ceiling is not None and asked >= ceiling):
            return base.turn_rate, OPERATOR
        return rate, source

    if own is not None and own.turn_rate:
        return capped(own.turn_rate, PERSONAL)
    saying = [team for team in teams if rate_per_second(team.turn_rate) is not None]
    if not saying or len(saying) < len(teams):
        return base.turn_rate, OPERATOR
    best = max(saying, key=lambda team: rate_per_second(team.turn_rate) or 0)
    return capped(best.turn_rate, f"team:{best.slug}")


def _network(base: Policy, teams: Sequence[Team], own: PersonalPolicy | None) -> tuple[bool, str]:
    if not base.exec_network:
        return False, OPERATOR
    if own is not None and own.exec_network is not None:
        return own.exec_network, PERSONAL
    if not teams or any(team.exec_network is not False for team in teams):
        allowing = [team.slug for team in teams if team.exec_network is True]
        return True, _from(allowing) if allowing else OPERATOR
    return False, _from(team.slug for team in teams)


def _hidden(app: str, model: str, user_id: int) -> frozenset[str]:
    """Names of the `app.model` rows (MCP servers, skills) assigned to some team, none of
    them the person's: one query."""
    from django.apps import apps

    rows = apps.get_model(app, model)._default_manager.filter(teams__isnull=False)
    mine = rows.filter(teams__group__user=user_id).values("pk")
    return frozenset(rows.exclude(pk__in=mine).values_list("name", flat=True).distinct())
