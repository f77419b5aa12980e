"""Writes: teams, their members and admins, memberships that follow a sign-in, tokens."""

from __future__ import annotations

import fnmatch
import logging
import secrets
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from django.contrib.auth.models import Group, User
from django.db import transaction
from django.utils import timezone

from teams_app.models import ApiToken, SignInIdentity, Team, token_digest

logger = logging.getLogger(__name__)

# What a named token's secret starts with: a scanner or a person can tell it for one.
TOKEN_PREFIX = "ast_"


@transaction.atomic
def create_team(*, slug: str, name: str = "", **fields: Any) -> Team:
    """A team and its group (named as its slug); `fields` are the team's own (policy,
    `synced`)."""
    group, _ = Group.objects.get_or_create(name=slug)
    return Team.objects.create(group=group, slug=slug, name=name or slug, **fields)


@transaction.atomic
def set_members(*, team: Team, users: Iterable[User]) -> None:
    team.group.user_set.set(list(users))


@transaction.atomic
def set_admins(*, team: Team, users: Iterable[User]) -> None:
    """The team's admins, each made a member too: an admin manages a team they belong to."""
    admins = list(users)
    team.admins.set(admins)
    team.group.user_set.add(*admins)


@transaction.atomic
def delete_team(*, team: Team) -> None:
    """The team, and its group with it (its members keep their accounts)."""
    group = team.group
    team.delete()
    group.delete()


def counted_groups(groups: Iterable[str], patterns: Sequence[str]) -> set[str]:
    """The provider's groups that name teams: a leading `/` (Keycloak's group paths) and
    case dropped, those that match one of `patterns` kept."""
    names = {str(group).strip().lstrip("/").lower() for group in groups if str(group).strip()}
    return {name for name in names if any(fnmatch.fnmatchcase(name, p) for p in patterns)}


@transaction.atomic
def sync_memberships(
    *,
    user: User,
    groups: Iterable[str],
    provider: str,
    issuer: str,
    subject: str,
    patterns: Sequence[str] = ("*",),
) -> list[str]:
    """At a sign-in through an identity provider: `user` is a member of each synced team
    whose slug is one of their `groups` there, and of no other synced team. Teams whose
    members are set by hand (`synced` off) are left alone. Returns the slugs they are in."""
    wanted = counted_groups(groups, [p.lower() for p in patterns])
    synced = Team.objects.filter(synced=True).select_related("group")
    current = set(user.groups.values_list("pk", flat=True))
    add = [team.group for team in synced if team.slug in wanted and team.group.pk not in current]
    drop = [team.group for team in synced if team.slug not in wanted and team.group.pk in current]
    if add:
        user.groups.add(*add)
    if drop:
        user.groups.remove(*drop)
    SignInIdentity.objects.update_or_create(
        issuer=issuer,
        subject=subject,
        defaults={
            "user": user,
            "provider": provider,
            "groups": sorted(wanted),
            "last_sign_in": timezone.now(),
        },
    )
    if add or drop:
        logger.info(
            "%s signed in through %s: joined %s, left %s",
            user,
            provider,
            [group.name for group in add] or "none",
            [group.name for group in drop] or "none",
        )
    return sorted(Team.objects.filter(group__user=user).values_list("slug", flat=True))


def create_token(*, user: User, name: str, expires: datetime | None = None) -> tuple[ApiToken, str]:
    """A named token and its secret, which is shown this once and kept only as a digest."""
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        name=name,
        digest=token_digest(secret),
        prefix=secret[: len(TOKEN_PREFIX) + 4],
        expires=expires,
    )
    return token, secret
