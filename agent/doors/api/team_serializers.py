"""Teams as `/api/teams` and `/api/me` read and write them.

A policy key left out, or null, is the operator's setting. What a team may allow is checked
against the operator's settings here, before anything is stored: a team cannot allow a model
the site does not offer, `exec` the network the site keeps from it, or a budget or a turn
rate past the site's.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from asgiref.sync import async_to_sync
from django.contrib.auth.models import Group, User
from rest_framework import serializers

from agent.conf import AgentSettings, agent_settings
from agent.doors.api.known_fields import KnownFieldsOnly
from agent.doors.api.serializers import ToolPatternsField
from agent.turn import unknown_tools
from mcp_app.models import McpServer
from skills_app.models import Skill
from teams_app.models import Team
from teams_app.policy import rate_per_second

POLICY_KEYS = (
    "models",
    "tools",
    "approve_tools",
    "member_daily_budget",
    "team_daily_budget",
    "turn_rate",
    "exec_network",
)


def policy_of(team: Team) -> dict[str, Any]:
    def money(amount: Decimal | None) -> float | None:
        return None if amount is None else float(amount)

    return {
        "models": team.allowed_models,
        "tools": team.tools,
        "approve_tools": list(team.approve_tools or []),
        "member_daily_budget": money(team.member_daily_budget),
        "team_daily_budget": money(team.team_daily_budget),
        "turn_rate": team.turn_rate or None,
        "exec_network": team.exec_network,
    }


def team_out(team: Team) -> dict[str, Any]:
    return {
        "slug": team.slug,
        "name": team.name,
        "members": sorted(user.get_username() for user in team.group.user_set.all()),
        "admins": sorted(user.get_username() for user in team.admins.all()),
        "synced": team.synced,
        "policy": policy_of(team),
        "mcp_servers": sorted(server.name for server in team.mcp_servers.all()),
        "skills": sorted(skill.name for skill in team.skills.all()),
        "created": team.created,
        "updated": team.updated,
    }


class PolicyOut(serializers.Serializer):
    models = serializers.ListField(child=serializers.CharField(), allow_null=True)
    tools = serializers.ListField(child=serializers.CharField(), allow_null=True)
    approve_tools = serializers.ListField(child=serializers.CharField())
    member_daily_budget = serializers.FloatField(allow_null=True)
    team_daily_budget = serializers.FloatField(allow_null=True)
    turn_rate = serializers.CharField(allow_null=True)
    exec_network = serializers.BooleanField(allow_null=True)


class TeamOut(serializers.Serializer):
    slug = serializers.SlugField()
    name = serializers.CharField()
    members = serializers.ListField(child=serializers.CharField())
    admins = serializers.ListField(child=serializers.CharField())
    synced = serializers.BooleanField(
        help_text="Members follow the identity provider's groups at each sign-in."
    )
    policy = PolicyOut(help_text="A key that is null: the operator's setting.")
    mcp_servers = serializers.ListField(child=serializers.CharField())
    skills = serializers.ListField(child=serializers.CharField())
    created = serializers.DateTimeField()
    updated = serializers.DateTimeField()


class PolicyIn(KnownFieldsOnly):
    models = serializers.ListField(
        child=serializers.CharField(max_length=200),
        allow_null=True,
        required=False,
        help_text="Model ids its members may pick, among the site's (`GET /api/models`).",
    )
    tools = serializers.ListField(
        child=serializers.CharField(max_length=200),
        allow_null=True,
        required=False,
        help_text="Tools their agents may use (`GET /api/tools`); null: every tool.",
    )
    approve_tools = ToolPatternsField(
        required=False, help_text="Tools (or patterns) whose calls wait for a yes."
    )
    member_daily_budget = serializers.DecimalField(
        max_digits=10, decimal_places=2, min_value=Decimal(0), allow_null=True, required=False
    )
    team_daily_budget = serializers.DecimalField(
        max_digits=10, decimal_places=2, min_value=Decimal(0), allow_null=True, required=False
    )
    turn_rate = serializers.CharField(
        max_length=40, allow_null=True, allow_blank=True, required=False
    )
    exec_network = serializers.BooleanField(allow_null=True, required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        conf = agent_settings()
        errors: dict[str, str] = {}
        for key, check in (
            ("models", _models_problem),
            ("tools", _tools_problem),
            ("member_daily_budget", _budget_problem),
            ("turn_rate", _rate_problem),
            ("exec_network", _network_problem),
        ):
            if attrs.get(key) not in (None, ""):
                problem = check(attrs[key], conf)
                if problem:
                    errors[key] = problem
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


def _models_problem(models: list[str], conf: AgentSettings) -> str:
    outside = [name for name in models if name not in conf.models]
    if not outside:
        return ""
    offered = ", ".join(conf.models) or "none"
    return f"the site does not offer {', '.join(outside)} (it offers: {offered})"


def _tools_problem(tools: list[str], conf: AgentSettings) -> str:
    unknown = async_to_sync(unknown_tools)(tools, conf)
    if not unknown:
        return ""
    return f"unknown tools: {', '.join(unknown)} (GET /api/tools lists the tools)"


def _budget_problem(amount: Decimal, conf: AgentSettings) -> str:
    if conf.user_daily_budget > 0 and amount > Decimal(str(conf.user_daily_budget)):
        return (
            f"the site's budget per person is ${conf.user_daily_budget:.2f} a day "
            "(AGENT_USER_DAILY_BUDGET); a team may set less, not more"
        )
    return ""


def _rate_problem(rate: str, conf: AgentSettings) -> str:
    asked = rate_per_second(rate)
    if asked is None:
        return "a rate looks like 30/min or 500/day"
    ceiling = rate_per_second(conf.turn_rate)
    if ceiling is not None and asked > ceiling:
        return (
            f"the site allows each person {conf.turn_rate} (AGENT_TURN_RATE); a team may set "
            "less, not more"
        )
    return ""


def _network_problem(allowed: bool, conf: AgentSettings) -> str:
    if allowed and not conf.exec_network:
        return "the site keeps exec off the network (AGENT_EXEC_NETWORK); a team cannot allow it"
    return ""


class TeamIn(KnownFieldsOnly):
    slug = serializers.SlugField(max_length=80)
    name = serializers.CharField(max_length=150, required=False, allow_blank=True)
    members = serializers.ListField(child=serializers.CharField(), required=False)
    admins = serializers.ListField(child=serializers.CharField(), required=False)
    synced = serializers.BooleanField(required=False)
    policy = PolicyIn(required=False)
    mcp_servers = serializers.ListField(child=serializers.CharField(), required=False)
    skills = serializers.ListField(child=serializers.CharField(), required=False)

    def validate_slug(self, value: str) -> str:
        value = value.lower()
        exists = Team.objects.filter(slug=value)
        if self.instance is not None:
            exists = exists.exclude(pk=self.instance.pk)
        if exists.exists():
            raise serializers.ValidationError(f"a team {value} exists already")
        renamed = self.instance is not None and value != self.instance.slug
        # The team's group is named as its slug, and a group of that name is another's.
        if renamed and Group.objects.filter(name=value).exists():
            raise serializers.ValidationError(f"a group named {value} exists already")
        return value

    def validate_members(self, value: list[str]) -> list[User]:
        return _users(value)

    def validate_admins(self, value: list[str]) -> list[User]:
        return _users(value)

    def validate_mcp_servers(self, value: list[str]) -> list[McpServer]:
        return _named(McpServer, value, "MCP servers")

    def validate_skills(self, value: list[str]) -> list[Skill]:
        return _named(Skill, value, "skills")


def _users(names: list[str]) -> list[User]:
    wanted = list(dict.fromkeys(names))
    found = {user.get_username(): user for user in User.objects.filter(username__in=wanted)}
    missing = [name for name in wanted if name not in found]
    if missing:
        raise serializers.ValidationError(f"no such users: {', '.join(missing)}")
    return [found[name] for name in wanted]


def _named(model: Any, names: list[str], what: str) -> list[Any]:
    wanted = list(dict.fromkeys(names))
    found = {row.name: row for row in model.objects.filter(name__in=wanted)}
    missing = [name for name in wanted if name not in found]
    if missing:
        raise serializers.ValidationError(f"no such {what}: {', '.join(missing)}")
    return [found[name] for name in wanted]


class SourcedOut(serializers.Serializer):
    value = serializers.JSONField()
    source = serializers.CharField(
        help_text='Where it came from: "operator" (the site\'s settings), "personal" (set '
        'for you by staff), "team:<slug>" or "teams:<a>,<b>".'
    )


class EffectivePolicyOut(serializers.Serializer):
    models = SourcedOut()
    tools = SourcedOut(help_text="A value of null: every tool.")
    approve_tools = SourcedOut(many=True)
    member_daily_budget = SourcedOut()
    team_daily_budget = SourcedOut(many=True)
    turn_rate = SourcedOut()
    exec_network = SourcedOut()


class MeUserOut(serializers.Serializer):
    id = serializers.IntegerField()
    username = serializers.CharField()
    name = serializers.CharField()
    email = serializers.CharField()
    is_staff = serializers.BooleanField()
    is_superuser = serializers.BooleanField()


class MyTeamOut(serializers.Serializer):
    slug = serializers.SlugField()
    name = serializers.CharField()
    admin = serializers.BooleanField(help_text="Whether you manage this team.")


class MeOut(serializers.Serializer):
    user = MeUserOut()
    teams = MyTeamOut(many=True)
    policy = EffectivePolicyOut()
