"""A group as SCIM sees it: a team (`id` its pk), found by its slug, the group's
`displayName` slugified; its members are the team's Django group's users.

A team that SCIM makes is not synced at sign-in (`synced` off): its members are what the
provider pushes here, and a groups claim at sign-in that names the provider's groups
otherwise (Entra ID sends their object ids) does not take them away again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from django.contrib.auth.models import Group, User
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.text import slugify

from agent.doors.scim.errors import invalid_value, taken
from agent.doors.scim.listing import Conditions, by_pk, pks_of
from agent.doors.scim.patch import Operation
from agent.doors.scim.users import scim_users
from teams_app import services
from teams_app.models import Team

logger = logging.getLogger(__name__)

GROUP_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:Group"
SLUG_LENGTH = Team._meta.get_field("slug").max_length or 80


def slug_of(display_name: Any) -> str:
    if not isinstance(display_name, str) or not display_name.strip():
        raise invalid_value("displayName is required")
    slug = slugify(display_name)[:SLUG_LENGTH].strip("-")
    if not slug:
        raise invalid_value(f"displayName {display_name!r} has no letter or digit to name a team")
    return slug


def _by_name(value: str) -> Q:
    slug = slugify(value)[:SLUG_LENGTH].strip("-")
    return Q(slug=slug) if slug else Q(pk__in=[])


def _by_member(value: str) -> Q:
    return by_pk(value, "group__user__pk")


GROUP_FILTERS: Conditions = {
    "displayname": _by_name,
    "id": by_pk,
    "members": _by_member,
    "members.value": _by_member,
}


def teams() -> QuerySet[Team]:
    return Team.objects.select_related("group").order_by("pk")


def group_resource(request: HttpRequest, team: Team) -> dict[str, Any]:
    members = team.group.user_set.filter(is_superuser=False).order_by("pk")
    return {
        "schemas": [GROUP_SCHEMA],
        "id": str(team.pk),
        "displayName": team.name,
        "members": [
            {
                "value": str(user.pk),
                "display": user.username,
                "type": "User",
                "$ref": request.build_absolute_uri(reverse("scim-user", args=[user.pk])),
            }
            for user in members
        ],
        "meta": {
            "resourceType": "Group",
            "created": team.created.isoformat(),
            "lastModified": team.updated.isoformat(),
            "location": request.build_absolute_uri(reverse("scim-group", args=[team.pk])),
        },
    }


def member_ids(value: Any) -> list[str]:
    """The user ids of a members value: `[{"value": "7"}, …]` (or one such object)."""
    items = value if isinstance(value, list) else [value]
    ids = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("value"), str | int):
            raise invalid_value('members are objects such as {"value": "<a user id>"}')
        ids.append(str(item["value"]).strip())
    return ids


def users_of(ids: Iterable[str]) -> list[User]:
    wanted = set(ids)
    numbers = pks_of(wanted)
    found = list(scim_users().filter(pk__in=numbers))
    missing = wanted - {str(user.pk) for user in found}
    if missing:
        raise invalid_value(f"no user with the id {', '.join(sorted(missing))}")
    return found


def create_group(display_name: Any, members: Iterable[str]) -> Team:
    slug = slug_of(display_name)
    if Team.objects.filter(slug=slug).exists():
        raise taken(f"a team {slug} exists already")
    team = services.create_team(slug=slug, name=display_name.strip(), synced=False)
    users = users_of(members)
    if users:
        team.group.user_set.add(*users)
    return team


def rename(team: Team, display_name: Any) -> None:
    slug = slug_of(display_name)
    if slug != team.slug:
        if Team.objects.filter(slug=slug).exclude(pk=team.pk).exists():
            raise taken(f"a team {slug} exists already")
        # The team's group is named as its slug, and a group of that name is another's.
        if Group.objects.filter(name=slug).exclude(pk=team.group.pk).exists():
            raise taken(f"a group named {slug} exists already")
        team.group.name = slug
        team.group.save(update_fields=["name"])
    team.slug, team.name = slug, display_name.strip()
    team.save()


def set_members(team: Team, ids: Iterable[str]) -> None:
    """The team's members are the users `ids` names (its superusers, whom SCIM does not
    see, stay)."""
    kept = list(team.group.user_set.filter(is_superuser=True))
    services.set_members(team=team, users=[*users_of(ids), *kept])


def apply(team: Team, operation: Operation) -> None:
    """One PATCH operation on `team`."""
    path, value = operation.path, operation.value
    assert path is not None
    if path.attr == "displayname":
        if operation.op == "remove":
            raise invalid_value("displayName cannot be removed")
        rename(team, value)
    elif path.attr == "members" and operation.op == "remove":
        if path.key == "value" and path.match:
            ids = [path.match]
        elif value is not None:
            ids = member_ids(value)  # Entra ID names them in the value
        else:
            ids = None  # all of them
        leaving = team.group.user_set.filter(is_superuser=False)
        if ids is not None:
            leaving = leaving.filter(pk__in=pks_of(ids))
        team.group.user_set.remove(*leaving)
    elif path.attr == "members" and operation.op == "replace":
        set_members(team, member_ids(value) if value is not None else [])
    elif path.attr == "members":
        users = users_of(member_ids(value))
        if users:
            team.group.user_set.add(*users)
    else:
        logger.debug("SCIM %s of %s on a group: not kept here", operation.op, path.attr)
