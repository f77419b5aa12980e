"""The REST doors: thin DRF views over the selectors and services."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agent.api.permissions import owns_session
from agent.api.serializers import MessageOut, SessionOut, SessionUpdateIn
from sessions_app.models import Session


def owned_session(request: Request, key: str) -> Session:
    """The user's session `key`; another user's is as missing as one that never was."""
    session = Session.objects.filter(key=key).first()
    if session is None or not owns_session(request.user, session):
        raise Http404("no such session")
    return session


class SessionList(APIView):
    def get(self, request: Request) -> Response:
        sessions = Session.objects.filter(owner=request.user).order_by("-updated")
        return Response(SessionOut(sessions, many=True).data)


class SessionDetail(APIView):
    def get(self, request: Request, key: str) -> Response:
        return Response(SessionOut(owned_session(request, key)).data)

    def patch(self, request: Request, key: str) -> Response:
        session = owned_session(request, key)
        data = SessionUpdateIn(data=request.data)
        data.is_valid(raise_exception=True)
        if "title" in data.validated_data:
            session.title = data.validated_data["title"]
            session.save(update_fields=["title", "updated"])
        return Response(SessionOut(session).data)

    def delete(self, request: Request, key: str) -> Response:
        owned_session(request, key).delete()
        return Response(status=204)


class SessionMessages(APIView):
    def get(self, request: Request, key: str, **kwargs: Any) -> Response:
        session = owned_session(request, key)
        return Response(MessageOut(session.messages.order_by("id"), many=True).data)
