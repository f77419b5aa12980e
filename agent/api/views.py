"""The REST doors: thin DRF views over the selectors and services."""

from __future__ import annotations

import uuid
from typing import Any

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView

from agent import ratelimit
from agent.api.permissions import owns_session
from agent.api.schema import AUTH_ERRORS, INVALID, NO_MODEL, NOT_FOUND, THROTTLED
from agent.api.serializers import (
    HealthOut,
    MessageOut,
    SessionOut,
    SessionUpdateIn,
    TaskIn,
    TaskOut,
    ToolOut,
)
from agent.conf import agent_settings
from agent.service import build_tools
from agent.tasks import cancel_task, submit_task
from agent.tools.registry import ToolRegistry
from sessions_app import selectors, services
from sessions_app.models import Run, Session


def owned_session(request: Request, key: str) -> Session:
    """The user's session `key`. Keys are per user, so another user's is simply not there."""
    session = selectors.find_session(key=key, owner=request.user)
    if session is None:
        raise Http404("no such session")
    return session


class SessionList(APIView):
    @extend_schema(responses={200: SessionOut(many=True), **AUTH_ERRORS})
    def get(self, request: Request) -> Response:
        sessions = Session.objects.filter(owner=request.user).order_by("-updated")
        return Response(SessionOut(sessions, many=True).data)


class SessionDetail(APIView):
    @extend_schema(responses={200: SessionOut, **AUTH_ERRORS, **NOT_FOUND})
    def get(self, request: Request, key: str) -> Response:
        return Response(SessionOut(owned_session(request, key)).data)

    @extend_schema(
        request=SessionUpdateIn,
        responses={200: SessionOut, **INVALID, **AUTH_ERRORS, **NOT_FOUND},
    )
    def patch(self, request: Request, key: str) -> Response:
        session = owned_session(request, key)
        data = SessionUpdateIn(data=request.data)
        data.is_valid(raise_exception=True)
        if "title" in data.validated_data:
            services.rename_session(session=session, title=data.validated_data["title"])
        return Response(SessionOut(session).data)

    @extend_schema(
        responses={204: None, **AUTH_ERRORS, **NOT_FOUND},
        description="Delete the session with its messages and tasks. A running turn stops "
        "and the chat's open sockets close.",
    )
    def delete(self, request: Request, key: str) -> Response:
        services.delete_session(session=owned_session(request, key))
        return Response(status=204)


class SessionMessages(APIView):
    @extend_schema(responses={200: MessageOut(many=True), **AUTH_ERRORS, **NOT_FOUND})
    def get(self, request: Request, key: str, **kwargs: Any) -> Response:
        session = owned_session(request, key)
        return Response(MessageOut(session.messages.order_by("id"), many=True).data)


class Health(APIView):
    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]

    @extend_schema(responses=HealthOut)
    def get(self, request: Request) -> Response:
        model = agent_settings().model or None
        return Response({"status": "ok", "model": model, "tools": tool_registry().names()})


class Tools(APIView):
    @extend_schema(responses={200: ToolOut(many=True), **AUTH_ERRORS})
    def get(self, request: Request) -> Response:
        tools = [definition["function"] for definition in tool_registry().definitions()]
        return Response(ToolOut(tools, many=True).data)


class TurnRateThrottle(BaseThrottle):
    """The per-user turn limit the web chat counts against too (AGENT_TURN_RATE)."""

    def __init__(self) -> None:
        self.retry_after: float | None = None

    def allow_request(self, request: Request, view: Any) -> bool:
        self.retry_after = ratelimit.take(request.user.pk)
        return self.retry_after is None

    def wait(self) -> float | None:
        return self.retry_after


class TaskCreate(APIView):
    throttle_classes = [TurnRateThrottle]

    @extend_schema(
        request=TaskIn,
        responses={200: TaskOut, 202: TaskOut, **INVALID, **AUTH_ERRORS, **THROTTLED, **NO_MODEL},
        description="Run the agent on a prompt. With `wait` (the default) the answer is the "
        "finished task; without, a queued task (202) that the worker runs.",
    )
    def post(self, request: Request) -> Response:
        data = TaskIn(data=request.data)
        data.is_valid(raise_exception=True)
        fields = data.validated_data
        run = submit_task(
            user=request.user,
            prompt=fields["prompt"],
            context=fields.get("context"),
            session_key=fields.get("session"),
            model=fields.get("model"),
            wait=fields["wait"],
        )
        return Response(TaskOut(run).data, status=200 if fields["wait"] else 202)


class TaskDetail(APIView):
    @extend_schema(responses={200: TaskOut, **AUTH_ERRORS, **NOT_FOUND})
    def get(self, request: Request, task_id: str) -> Response:
        return Response(TaskOut(owned_run(request, task_id)).data)


class TaskCancel(APIView):
    @extend_schema(request=None, responses={200: TaskOut, **AUTH_ERRORS, **NOT_FOUND})
    def post(self, request: Request, task_id: str) -> Response:
        return Response(TaskOut(cancel_task(owned_run(request, task_id))).data)


def owned_run(request: Request, task_id: str) -> Run:
    try:
        pk = uuid.UUID(task_id)
    except ValueError:
        raise Http404("no such task") from None
    run = Run.objects.select_related("session").filter(pk=pk).first()
    if run is None or not owns_session(request.user, run.session):
        raise Http404("no such task")
    return run


def tool_registry() -> ToolRegistry:
    return build_tools(agent_settings())
