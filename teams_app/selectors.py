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


# The issuer of the identities the provider's provisioning (SCIM) records.
PROVISIONED = "scim"


def provisioned_user(*, username: str, email: str) -> User | None:
    """The account the identity provider's provisioning made for the person who signs in
    through it for the first time: the same name there (`userName` = `preferred_username`),
    or else the same address. Accounts made any other way are never matched by name or
    address (a sign-in must not take over a local account)."""
    accounts = User.objects.filter(sign_in_identities__issuer=PROVISIONED)
    found = accounts.filter(username__iexact=username).first() if username else None
    if found is None and email:
        matches = list(accounts.filter(email__iexact=email)[:2])
        found = matches[0] if len(matches) == 1 else None
    return found


def teams_for(user: User) -> QuerySet[Team]:
    """The teams `user` may see in the API: every team for staff, else those they admin."""
    teams = Team.objects.select_related("group").prefetch_related("admins", "group__user_set")
    if getattr(user, "is_staff", False):
        return teams
    return teams.filter(admins=user)
