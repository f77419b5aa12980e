"""What the shared-chat endpoints take and show: whom to share a chat with, and a share with
its owner, its readers and (read alone) its snapshot."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from rest_framework import serializers
from rest_framework.request import Request

from agent.doors.api.known_fields import KnownFieldsOnly
from agent.doors.api.serializers import StrictCharField
from sessions_app.models import ChatShare

# Enough for any team a person is in and the people they would name by hand.
MAX_NAMED = 100


class ShareIn(KnownFieldsOnly):
    teams = serializers.ListField(
        child=serializers.SlugField(max_length=80),
        required=False,
        max_length=MAX_NAMED,
        help_text="Slugs of your teams whose members may read it (`GET /api/me` lists yours).",
    )
    people = serializers.ListField(
        child=StrictCharField(max_length=150),
        required=False,
        max_length=MAX_NAMED,
        help_text="Usernames of the people who may read it.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs.setdefault("teams", [])
        attrs.setdefault("people", [])
        if not attrs["teams"] and not attrs["people"]:
            raise serializers.ValidationError(
                {"detail": "Name at least one team or person to share the chat with."}
            )
        return attrs


class PersonOut(serializers.Serializer):
    username = serializers.CharField()
    name = serializers.CharField(help_text="Their full name, or their username.")


class ShareOut(serializers.Serializer):
    id = serializers.CharField(help_text="The share's id: random, the link's last part.")
    url = serializers.URLField(help_text="The page that shows it, read-only, to its readers.")
    title = serializers.CharField()
    owner = PersonOut(help_text="Who shared it.")
    teams = serializers.ListField(
        child=serializers.CharField(), help_text="Slugs of the teams whose members may read it."
    )
    people = serializers.ListField(
        child=serializers.CharField(), help_text="Usernames of the people who may read it."
    )
    source = serializers.CharField(
        allow_null=True,
        help_text="The key of the chat it was taken from: to its owner alone, while it exists.",
    )
    created = serializers.DateTimeField(help_text="When it was shared: the snapshot's time.")


class ShareDetailOut(ShareOut):
    messages = serializers.ListField(
        child=serializers.DictField(),
        help_text="The chat as it was when shared, oldest first, as the chat's `history` frame "
        "shows messages: each with `role`, `content`, `tool_calls`, `tool_call_id`, `name`, "
        "`reasoning_content`, `stopped`, `created`.",
    )


class ShareListOut(serializers.Serializer):
    mine = ShareOut(many=True, help_text="The chats you shared, the newest first.")
    with_me = ShareOut(
        many=True, help_text="The chats others shared with you or a team of yours, newest first."
    )


class ContinuedOut(serializers.Serializer):
    key = serializers.CharField(help_text="The new chat's session key (`web:<id>`).")
    url = serializers.URLField(help_text="The new chat on the chat page.")


def person(user: Any) -> dict[str, str]:
    return {"username": user.get_username(), "name": user.get_full_name() or user.get_username()}


def share_out(share: ChatShare, request: Request, *, messages: bool = False) -> dict[str, Any]:
    """A share as the API shows it to `request`'s user (a reader or its owner). Its teams
    are named by their profiles' slugs; a group no team has any more is left out."""
    mine = share.owner_id == request.user.pk
    slugs = [team.slug for group in share.teams.all() if (team := getattr(group, "team", None))]
    shown: dict[str, Any] = {
        "id": share.pk,
        "url": request.build_absolute_uri(reverse("shared-chat", args=[share.pk])),
        "title": share.title,
        "owner": person(share.owner),
        "teams": sorted(slugs),
        "people": sorted(user.get_username() for user in share.people.all()),
        "source": share.source.key if mine and share.source is not None else None,
        "created": share.created,
    }
    if messages:
        shown["messages"] = share.messages
    return shown
