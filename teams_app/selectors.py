"""Reads: teams as the API and the page show them, and what a team spent."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from django.contrib.auth.models import User
from django.db.models import Q, QuerySet, Sum
from django.utils import timezone

from sessions_app.models import DailyUsage, SpendingHold
from teams_app.models import Team


def team_spent(*, slug: str, day: date) -> Decimal:
    """What the runs of the team's members cost on `day` (with a known price), and what
    their running work holds now: a team's budget counts both, as a person's does."""
    members = Q(owner__groups__team__slug=slug)
    spent = DailyUsage.objects.filter(members, day=day).aggregate(total=Sum("priced_cost"))
    held = SpendingHold.objects.filter(members, expires__gt=timezone.now()).aggregate(
        total=Sum("amount")
    )
    return Decimal(spent["total"] or 0) + Decimal(held["total"] or 0)


def teams_for(user: User) -> QuerySet[Team]:
    """The teams `user` may see in the API: every team for staff, else those they admin."""
    teams = Team.objects.select_related("group").prefetch_related("admins", "group__user_set")
    if getattr(user, "is_staff", False):
        return teams
    return teams.filter(admins=user)
