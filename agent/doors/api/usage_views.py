"""The REST endpoint of a user's usage: what their runs used and cost per UTC day and per
model, where they stand against their daily budget, and what the chats of their teams used
per member."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agent.doors.api.schema import AUTH_ERRORS, INVALID
from agent.doors.api.serializers import UsageOut
from agent.turn import settings_for
from sessions_app import usage
from teams_app.models import Team

MAX_DAYS = 366


class UsageQueryIn(serializers.Serializer):
    days = serializers.IntegerField(
        min_value=1,
        max_value=MAX_DAYS,
        default=30,
        help_text="UTC days to cover, today included (1 to 366).",
    )


class UsageLineOut(UsageOut):
    runs = serializers.IntegerField(help_text="Runs that called a model.")


class DayUsageOut(UsageLineOut):
    day = serializers.DateField(help_text="A UTC day: the runs that ended on it.")


class ModelUsageOut(UsageLineOut):
    model = serializers.CharField()


class BudgetOut(serializers.Serializer):
    daily = serializers.FloatField(
        allow_null=True, help_text="USD your runs may cost per UTC day; null: no budget."
    )
    spent_today = serializers.FloatField(help_text="USD your priced runs cost since 00:00 UTC.")
    left_today = serializers.FloatField(allow_null=True)
    renews = serializers.DateTimeField(help_text="When today's spending starts again from 0.")


class MemberUsageOut(UsageLineOut):
    id = serializers.IntegerField(allow_null=True)
    user = serializers.CharField(
        allow_null=True, help_text="Their username; null for an account deleted since."
    )
    name = serializers.CharField(allow_null=True)


class TeamUsageOut(UsageLineOut):
    team = serializers.CharField(help_text="The team's slug.")
    name = serializers.CharField()
    members = MemberUsageOut(
        many=True,
        help_text="Per member whose message started the runs, the most costly first; only "
        "those who used any.",
    )


class UsageReportOut(serializers.Serializer):
    days = serializers.IntegerField()
    since = serializers.DateField()
    until = serializers.DateField()
    total = UsageLineOut()
    by_day = DayUsageOut(many=True, help_text="Each day that had any use, oldest first.")
    by_model = ModelUsageOut(many=True)
    budget = BudgetOut()
    teams = TeamUsageOut(
        many=True,
        help_text="What the chats of each of your teams (staff: every team) used over the "
        "same days, in all and per member. A member's own usage above counts their turns "
        "in team chats too.",
    )


class Usage(APIView):
    @extend_schema(
        parameters=[UsageQueryIn],
        responses={200: UsageReportOut, **INVALID, **AUTH_ERRORS},
        description="What your runs used and cost over the last `days` UTC days: in all, per "
        "day and per model, and your daily budget; and what your teams' chats used, per "
        "member. `cost` is null where a run's model has no known price; `priced_cost` is "
        "what the runs with one cost.",
    )
    def get(self, request: Request) -> Response:
        # A plain dict: a repeated parameter is one value, as every other endpoint reads it.
        query = UsageQueryIn(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        days = query.validated_data["days"]
        report = usage.usage_report(owner=request.user, days=days)
        # Their budget as their teams' policy makes it (`settings_for`).
        state = usage.budget_state(
            user_id=request.user.pk, site_budget=settings_for(request.user).user_daily_budget
        )
        limit = float(state.limit) if state.limit is not None else None
        report["budget"] = {
            "daily": limit,
            "spent_today": float(state.spent),
            "left_today": None if limit is None else max(0.0, limit - float(state.spent)),
            "renews": usage.next_day_starts(),
        }
        report["teams"] = teams_usage(request.user, days)
        return Response(UsageReportOut(report).data)


def teams_usage(user: Any, days: int) -> list[dict[str, Any]]:
    """What the chats of `user`'s teams (every team, for staff) used over the last `days`,
    per member: two queries, however many teams and members."""
    teams = Team.objects.all() if user.is_staff else Team.objects.filter(group__user=user)
    found = list(teams.order_by("slug").values_list("group_id", "slug", "name"))
    used = usage.team_chat_usage(
        team_ids=[group_id for group_id, _, _ in found], since=usage.first_day(days)
    )
    return [
        {
            "team": slug,
            "name": name or slug,
            **used[group_id]["total"],
            "members": used[group_id]["members"],
        }
        for group_id, slug, name in found
    ]
