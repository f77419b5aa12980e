"""The REST doors: thin DRF views over the selectors and services."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from asgiref.sync import async_to_sync
from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView

from agent.conf import agent_settings
from agent.doors import ratelimit
from agent.doors.api.pagination import LatestFirstCursorPagination, paginated_response
from agent.doors.api.schema import AUTH_ERRORS, INVALID, NO_MODEL, NOT_FOUND, THROTTLED
from agent.doors.api.serializers import (
    HealthOut,
    MessageOut,
    MessagesQueryIn,
    ModelsOut,
    SessionOut,
    SessionUpdateIn,
    TaskIn,
    TaskOut,
    ToolOut,
)
from agent.turn.runs import cancel_task, submit_task
from agent.turn.toolbox import known_tool_names, turn_registry
from sessions_app import selectors, services
from sessions_app.models import Run, Session


def owned_session(request: Request, key: str) -> Session:
    """The user's session `key`. Keys are per user, so another user's is simply not there."""
    session = selectors.find_session(key=key, owner=request.user)
    if session is None:
        raise Http404("no such session")
    return session


def owned_run(request: Request, task_id: UUID) -> Run:
    run = selectors.find_run(run_id=task_id, owner=request.user)
    if run is None:
        raise Http404("no such task")
    return run


class SessionList(APIView):
    # Not paged: a cursor needs an order that never changes, and this one moves with
    # every turn; the chat page's sidebar reads the list whole.
    @extend_schema(
        responses={200: SessionOut(many=True), **AUTH_ERRORS},
        description="Your sessions that the other session routes open (`web:` and `api:` "
        "keys), the most recently active first.",
    )
    def get(self, request: Request) -> Response:
        sessions = selectors.list_sessions(owner=request.user)
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
    # Not `pagination_class`: the schema would wrap the list in an envelope it does not have.
    pages = LatestFirstCursorPagination

    @extend_schema(
        operation_id="sessions_messages_list",
        parameters=[
            MessagesQueryIn,
            *pages.query_parameters(),
            OpenApiParameter(
                "Link",
                OpenApiTypes.STR,
                location=OpenApiParameter.HEADER,
                response=[200],
                description='`<url>; rel="prev"` to older messages, `<url>; rel="next"` to '
                "newer ones; absent at either end.",
            ),
        ],
        responses={200: MessageOut(many=True), **INVALID, **AUTH_ERRORS, **NOT_FOUND},
        description="The session's messages, archived ones included and marked, a page at a "
        "time. Without a cursor the page is the latest; each page reads oldest to newest, and "
        "the `Link` header leads to older (`prev`) and newer (`next`) pages.",
    )
    def get(self, request: Request, key: str) -> Response:
        session = owned_session(request, key)
        # A plain dict: from a QueryDict, DRF reads a missing boolean as false.
        query = MessagesQueryIn(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        messages = selectors.session_messages(
            session=session, archived=query.validated_data.get("archived")
        )
        return paginated_response(
            pagination=self.pages(),
            serializer_class=MessageOut,
            queryset=messages,
            request=request,
            view=self,
        )


class Health(APIView):
    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]

    @extend_schema(responses=HealthOut)
    def get(self, request: Request) -> Response:
        model = agent_settings().model or None
        # Tools of MCP servers not yet connected are left out: a health check never connects.
        names = known_tool_names(agent_settings())
        return Response({"status": "ok", "model": model, "tools": names})


class Models(APIView):
    @extend_schema(
        responses={200: ModelsOut, **AUTH_ERRORS},
        description="The model ids you may pick (`model` of a task, `/model` in a chat): "
        "AGENT_MODEL, the default, and AGENT_MODELS. Any other id is refused with a 400.",
    )
    def get(self, request: Request) -> Response:
        conf = agent_settings()
        return Response(ModelsOut({"default": conf.model or None, "models": conf.models}).data)


class Tools(APIView):
    @extend_schema(responses={200: ToolOut(many=True), **AUTH_ERRORS})
    def get(self, request: Request) -> Response:
        registry = async_to_sync(turn_registry)(agent_settings())
        tools = [definition["function"] for definition in registry.definitions()]
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
    def get(self, request: Request, task_id: UUID) -> Response:
        return Response(TaskOut(owned_run(request, task_id)).data)


class TaskCancel(APIView):
    @extend_schema(request=None, responses={200: TaskOut, **AUTH_ERRORS, **NOT_FOUND})
    def post(self, request: Request, task_id: UUID) -> Response:
        return Response(TaskOut(cancel_task(owned_run(request, task_id))).data)
