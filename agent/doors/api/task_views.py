"""The REST endpoints of tasks: run the agent on a prompt (now or queued for the worker),
read a task, cancel it, answer the tool calls it waits on. A task is a turn recorded as a
run, which the turn service runs."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import APIException, NotFound, PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView

from agent.doors.api.known_fields import NoFields
from agent.doors.api.schema import AUTH_ERRORS, INVALID, NO_MODEL, NOT_FOUND, THROTTLED, ErrorOut
from agent.doors.api.serializers import ApproveIn, TaskIn, TaskOut
from agent.turn import (
    ApprovalClosed,
    ApprovalNotFound,
    ApprovalRefused,
    approve_task,
    cancel_task,
    settings_for,
    submit_task,
    take_turn_slot,
)
from sessions_app import selectors
from sessions_app.models import Run
from sessions_app.services import NoSuchChat


def owned_run(request: Request, task_id: UUID) -> Run:
    run = selectors.find_run(run_id=task_id, owner=request.user)
    if run is None:
        raise Http404("no such task")
    return run


class TurnRateThrottle(BaseThrottle):
    """The per-user turn limit the web chat counts against too (AGENT_TURN_RATE)."""

    def __init__(self) -> None:
        self.retry_after: float | None = None

    def allow_request(self, request: Request, view: Any) -> bool:
        self.retry_after = take_turn_slot(request.user.pk)
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
        data = TaskIn(data=request.data, context={"conf": settings_for(request.user)})
        data.is_valid(raise_exception=True)
        fields = data.validated_data
        try:
            run = submit_task(
                user=request.user,
                prompt=fields["prompt"],
                context=fields.get("context"),
                session_key=fields.get("session"),
                model=fields.get("model"),
                wait=fields["wait"],
                tools=fields.get("tools"),
            )
        except NoSuchChat:  # a team chat of no team of theirs: as any session not theirs
            raise Http404("no such session") from None
        return Response(TaskOut(run).data, status=200 if fields["wait"] else 202)


class TaskDetail(APIView):
    @extend_schema(responses={200: TaskOut, **AUTH_ERRORS, **NOT_FOUND})
    def get(self, request: Request, task_id: UUID) -> Response:
        return Response(TaskOut(owned_run(request, task_id)).data)


class TaskCancel(APIView):
    @extend_schema(request=None, responses={200: TaskOut, **INVALID, **AUTH_ERRORS, **NOT_FOUND})
    def post(self, request: Request, task_id: UUID) -> Response:
        run = owned_run(request, task_id)
        NoFields(data=request.data).is_valid(raise_exception=True)
        return Response(TaskOut(cancel_task(run)).data)


class Answered(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "answered"


class TaskApprove(APIView):
    @extend_schema(
        request=ApproveIn,
        responses={
            200: TaskOut,
            202: TaskOut,
            **INVALID,
            **AUTH_ERRORS,
            403: OpenApiResponse(
                ErrorOut,
                description="A team chat's call: only the member who sent the message, or a "
                "team admin, may answer it.",
            ),
            404: OpenApiResponse(ErrorOut, description="No such task of yours, or no such call."),
            409: OpenApiResponse(
                ErrorOut,
                description="The call was answered already, or the task no longer waits.",
            ),
        },
        description="Answer a tool call the task waits on (its `pending`): allow it or not; "
        "`always` allows its tool for the rest of the task's session. Once no call waits any "
        "more the task goes on: with `wait` (the default) the answer is the task when it "
        "ends, or waits again; without, the worker goes on with it (202).",
    )
    def post(self, request: Request, task_id: UUID) -> Response:
        run = owned_run(request, task_id)
        data = ApproveIn(data=request.data)
        data.is_valid(raise_exception=True)
        fields = data.validated_data
        try:
            task, queued = approve_task(
                run,
                user=request.user,
                call_id=fields["call_id"],
                allow=fields["allow"],
                always=fields["always"],
                wait=fields["wait"],
            )
        except ApprovalNotFound as exc:
            raise NotFound(str(exc)) from None
        except ApprovalClosed as exc:
            raise Answered(str(exc)) from None
        except ApprovalRefused as exc:
            raise PermissionDenied(str(exc)) from None
        return Response(TaskOut(task).data, status=202 if queued else 200)
