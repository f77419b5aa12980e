"""`/api/teams` (staff make and delete teams; a team's admins change their own team) and
`/api/me` (who you are here, your teams, and what you may do, each part with its source)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agent.doors.api.schema import AUTH_ERRORS, INVALID, NOT_FOUND
from agent.doors.api.team_serializers import MeOut, TeamIn, TeamOut, team_out
from teams_app import rules, services
from teams_app.models import Team
from teams_app.policy import effective_policy
from teams_app.selectors import teams_for

# A policy's key in the API, and the team's field it is kept in.
_FIELDS = {
    "models": "allowed_models",
    "tools": "tools",
    "approve_tools": "approve_tools",
    "member_daily_budget": "member_daily_budget",
    "team_daily_budget": "team_daily_budget",
    "turn_rate": "turn_rate",
    "exec_network": "exec_network",
}
# What only staff change: who runs a team, what it is called (at the identity provider too)
# and where its members come from.
_STAFF_ONLY = ("slug", "name", "admins", "synced")


def _policy_fields(policy: dict[str, Any]) -> dict[str, Any]:
    fields = {}
    for key, value in policy.items():
        if key == "approve_tools" and value is None:
            value = []
        if key == "turn_rate" and value is None:
            value = ""
        fields[_FIELDS[key]] = value
    return fields


def _apply(team: Team, data: dict[str, Any]) -> None:
    """The writes of a POST or PATCH, in one transaction with the team's own."""
    if "members" in data:
        services.set_members(team=team, users=data["members"])
    if "admins" in data:
        services.set_admins(team=team, users=data["admins"])
    if "mcp_servers" in data:
        team.mcp_servers.set(data["mcp_servers"])
    if "skills" in data:
        team.skills.set(data["skills"])


def _team_admins_may(request: Request, team: Team, fields: dict[str, Any]) -> None:
    """Refuse what a team's admin, not staff, may not change (the admin's team page keeps to
    the same rules, `teams_app.admin_forms`)."""
    barred = [key for key in _STAFF_ONLY if key in fields and fields[key] != getattr(team, key)]
    if barred:
        raise PermissionDenied(f"Only staff change a team's {', '.join(barred)}.")
    problems: dict[str, list[str]] = {}
    if "members" in fields and team.synced:
        problems["members"] = ["this team's members follow the identity provider's groups"]
    budget = fields.get("policy", {}).get("team_daily_budget", team.team_daily_budget)
    if not rules.team_budget_narrows(team, budget):
        problems["policy"] = [
            f"a team's admin may lower its daily budget (${team.team_daily_budget}), not "
            "raise or remove it: ask staff"
        ]
    for field in ("mcp_servers", "skills"):
        if field in fields:
            problem = rules.assignment_problem(team, field, fields[field], admin=request.user)
            if problem:
                problems[field] = [problem]
    if problems:
        raise ValidationError(problems)


class TeamList(APIView):
    @extend_schema(
        responses={200: TeamOut(many=True), **AUTH_ERRORS},
        description="Every team (staff), or the teams you manage (a team's admin).",
    )
    def get(self, request: Request) -> Response:
        user = request.user
        if not user.is_staff and not Team.objects.filter(admins=user).exists():
            raise PermissionDenied("Only staff and teams' admins see teams.")
        return Response([team_out(team) for team in teams_for(user)])

    @extend_schema(
        request=TeamIn,
        responses={201: TeamOut, **INVALID, **AUTH_ERRORS},
        description="Make a team (staff only). A policy key left out: the operator's setting.",
    )
    def post(self, request: Request) -> Response:
        if not request.user.is_staff:
            raise PermissionDenied("Only staff make teams.")
        data = TeamIn(data=request.data)
        data.is_valid(raise_exception=True)
        fields = data.validated_data
        with transaction.atomic():
            team = services.create_team(
                slug=fields["slug"],
                name=fields.get("name", ""),
                synced=fields.get("synced", True),
                **_policy_fields(fields.get("policy", {})),
            )
            _apply(team, fields)
        return Response(team_out(_fresh(team.slug)), status=201)


def _fresh(slug: str) -> Team:
    return Team.objects.select_related("group").get(slug=slug)


class TeamDetail(APIView):
    def _team(self, request: Request, slug: str) -> Team:
        # Another team's existence is none of a team admin's business: a 404, as for none.
        team = teams_for(request.user).filter(slug=slug).first()
        if team is None:
            raise Http404
        return team

    @extend_schema(responses={200: TeamOut, **AUTH_ERRORS, **NOT_FOUND})
    def get(self, request: Request, slug: str) -> Response:
        return Response(team_out(self._team(request, slug)))

    @extend_schema(
        request=TeamIn(partial=True),
        responses={200: TeamOut, **INVALID, **AUTH_ERRORS, **NOT_FOUND},
        description="Change a team: staff, or the team's admins (its members, unless they "
        "follow the identity provider, its policy within the site's settings, its skills and "
        "MCP servers; not its slug, admins or whether it is synced).",
    )
    def patch(self, request: Request, slug: str) -> Response:
        team = self._team(request, slug)
        data = TeamIn(team, data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        fields = data.validated_data
        if not request.user.is_staff:
            _team_admins_may(request, team, fields)
        with transaction.atomic():
            for key in ("slug", "name", "synced"):
                if key in fields:
                    setattr(team, key, fields[key])
            for field, value in _policy_fields(fields.get("policy", {})).items():
                setattr(team, field, value)
            team.save()
            if "slug" in fields and team.group.name != team.slug:
                team.group.name = team.slug
                team.group.save(update_fields=["name"])
            _apply(team, fields)
        return Response(team_out(_fresh(team.slug)))

    @extend_schema(responses={204: None, **AUTH_ERRORS, **NOT_FOUND})
    def delete(self, request: Request, slug: str) -> Response:
        team = self._team(request, slug)
        if not request.user.is_staff:
            raise PermissionDenied("Only staff delete teams.")
        services.delete_team(team=team)
        return Response(status=204)


class Me(APIView):
    @extend_schema(
        responses={200: MeOut, **AUTH_ERRORS},
        description="You, your teams, and your effective policy: each part with where it "
        "came from (the site's settings, your teams', or your own set by staff).",
    )
    def get(self, request: Request) -> Response:
        user = request.user
        policy = effective_policy(user)
        return Response(
            {
                "user": {
                    "id": user.pk,
                    "username": user.get_username(),
                    "name": user.get_full_name() or user.get_username(),
                    "email": user.email,
                    "is_staff": user.is_staff,
                    "is_superuser": user.is_superuser,
                },
                "teams": [
                    {"slug": team.slug, "name": team.name, "admin": team.admin}
                    for team in policy.teams
                ],
                "policy": policy.as_json(),
            }
        )
