"""Shared chats: `POST /api/sessions/<key>/shares` shares one of your personal chats, as it
is now, read-only, with teams of yours and named people; `GET /api/shares` lists what you
shared and what was shared with you; `GET/DELETE /api/shares/<id>` reads one, or takes
yours back; `POST /api/shares/<id>/continue` copies one into a new chat of yours.

A share you may not read is a 404, as another person's chat is. Team slugs are resolved
here, to the groups the data layer keeps (`sessions_app.shares` knows no teams)."""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.auth.models import Group, User
from django.db.models import QuerySet
from django.http import Http404
from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agent.doors.api.schema import AUTH_ERRORS, INVALID, NOT_FOUND
from agent.doors.api.session_views import owned_session
from agent.doors.api.share_serializers import (
    ContinuedOut,
    ShareDetailOut,
    ShareIn,
    ShareListOut,
    ShareOut,
    share_out,
)
from sessions_app import keys, shares
from sessions_app.models import ChatShare
from teams_app.models import Team

logger = logging.getLogger(__name__)

# The chats of a team belong to it: its members read them already.
TEAM_CHANNEL = "team"


def _shown(found: QuerySet[ChatShare]) -> QuerySet[ChatShare]:
    """What `share_out` reads, in a few queries for a whole list."""
    return found.select_related("source").prefetch_related("teams__team", "people")


def _readable(request: Request, share_id: str) -> ChatShare:
    share = shares.visible_share(share_id=share_id, user=request.user)
    if share is None:
        raise Http404("no such shared chat")
    return share


def _teams(user: Any, slugs: list[str]) -> list[Group]:
    """The groups of the teams `slugs` names, each a team of `user`'s; a 400 naming the
    others (whether they exist is none of the caller's business)."""
    found = {
        team.slug: team.group
        for team in Team.objects.select_related("group").filter(slug__in=slugs, group__user=user)
    }
    missing = [slug for slug in dict.fromkeys(slugs) if slug not in found]
    if missing:
        raise ValidationError({"teams": [f"Not a team of yours: {', '.join(missing)}."]})
    return list(found.values())


def _people(names: list[str]) -> list[User]:
    found = {user.get_username(): user for user in User.objects.filter(username__in=names)}
    missing = [
        name for name in dict.fromkeys(names) if name not in found or not found[name].is_active
    ]
    if missing:
        raise ValidationError({"people": [f"No such person: {', '.join(missing)}."]})
    return list(found.values())


class SessionShares(APIView):
    @extend_schema(
        operation_id="sessions_shares_create",
        request=ShareIn,
        responses={201: ShareOut, **INVALID, **AUTH_ERRORS, **NOT_FOUND},
        description="Share your chat `key` as it is now: a read-only snapshot, tool calls "
        "and results included, for the members of your teams named in `teams` and the "
        "people named in `people` (at least one of them). What the chat says later is not "
        "shared. Each reader may continue it in a chat of their own.",
    )
    def post(self, request: Request, key: str) -> Response:
        session = owned_session(request, key)
        if session.owner_id != request.user.pk:
            raise Http404("no such session")
        if keys.split_key(session.key)[0] == TEAM_CHANNEL:
            raise ValidationError({"detail": "A team's chat is its members' already."})
        data = ShareIn(data=request.data)
        data.is_valid(raise_exception=True)
        teams = _teams(request.user, data.validated_data["teams"])
        people = _people(data.validated_data["people"])
        try:
            share = shares.create_share(
                owner=request.user, session=session, teams=teams, people=people
            )
        except shares.NothingToShare:
            raise ValidationError({"detail": "This chat has no messages to share yet."}) from None
        fresh = _shown(ChatShare.objects.filter(pk=share.pk)).get()
        return Response(ShareOut(share_out(fresh, request)).data, status=201)


class ShareList(APIView):
    @extend_schema(
        operation_id="shares_list",
        responses={200: ShareListOut, **AUTH_ERRORS},
        description="The chats you shared (`mine`) and those others shared with you or with "
        "a team of yours (`with_me`), the newest first, without their messages.",
    )
    def get(self, request: Request) -> Response:
        mine = _shown(shares.shares_by(owner=request.user))
        with_me = _shown(shares.shares_with(user=request.user))
        listed = {
            "mine": [share_out(share, request) for share in mine],
            "with_me": [share_out(share, request) for share in with_me],
        }
        return Response(ShareListOut(listed).data)


class ShareDetail(APIView):
    @extend_schema(
        responses={200: ShareDetailOut, **AUTH_ERRORS, **NOT_FOUND},
        description="A chat shared with you (or by you), with its messages as they were when "
        "it was shared.",
    )
    def get(self, request: Request, share_id: str) -> Response:
        share = _shown(ChatShare.objects.filter(pk=_readable(request, share_id).pk)).get()
        return Response(ShareDetailOut(share_out(share, request, messages=True)).data)

    @extend_schema(
        responses={204: None, **AUTH_ERRORS, **NOT_FOUND},
        description="Take your share back: its link leads nowhere from now on. Chats its "
        "readers already continued are theirs and stay.",
    )
    def delete(self, request: Request, share_id: str) -> Response:
        share = shares.own_share(share_id=share_id, owner=request.user)
        if share is None:
            raise Http404("no such shared chat of yours")
        shares.delete_share(share=share)
        return Response(status=204)


class ShareContinue(APIView):
    @extend_schema(
        request=None,
        responses={201: ContinuedOut, **AUTH_ERRORS, **NOT_FOUND},
        description="Copy the shared chat into a new web chat of yours: its messages become "
        "that chat's history, which the model reads on its next turn. Open it at `url`.",
    )
    def post(self, request: Request, share_id: str) -> Response:
        session = shares.continue_share(share=_readable(request, share_id), user=request.user)
        url = request.build_absolute_uri(reverse("chat-session", args=[session.key]))
        return Response(ContinuedOut({"key": session.key, "url": url}).data, status=201)
