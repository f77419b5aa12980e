"""The REST endpoints of a user's sessions: list them, read, rename or delete one, and page
through its messages. Thin DRF views over the selectors and services."""

from __future__ import annotations

import uuid

from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agent.doors.api.known_fields import AS_READ
from agent.doors.api.pagination import LatestFirstCursorPagination, paginated_response
from agent.doors.api.schema import AUTH_ERRORS, INVALID, NOT_FOUND
from agent.doors.api.serializers import (
    MessageOut,
    MessagesQueryIn,
    SessionCreateIn,
    SessionOut,
    SessionUpdateIn,
)
from sessions_app import selectors, services
from sessions_app.models import Session
from sessions_app.usage import session_usage
from teams_app.models import Team


def owned_session(request: Request, key: str) -> Session:
    """The user's session `key`, or a chat of one of their teams. Keys are per user, so
    another user's is simply not there, and another team's chat is not either."""
    session = selectors.find_session(key=key, owner=request.user)
    if session is None:
        raise Http404("no such session")
    return session


def deletable_session(request: Request, key: str) -> Session:
    """`owned_session`, which the user may delete: a team chat only its team's admins and
    staff may, since it is every member's."""
    session = owned_session(request, key)
    if session.team_id is not None and not (
        request.user.is_staff
        or Team.objects.filter(group_id=session.team_id, admins=request.user).exists()
    ):
        raise PermissionDenied("only the team's admins may delete a team chat")
    return session


class SessionList(APIView):
    # Not paged: a cursor needs an order that never changes, and this one moves with
    # every turn; the chat page's sidebar reads the list whole.
    @extend_schema(
        responses={200: SessionOut(many=True), **AUTH_ERRORS},
        description="Your sessions that the other session routes open (`web:` and `api:` "
        "keys), the most recently active first, each with its `usage` summed over its runs.",
    )
    def get(self, request: Request) -> Response:
        sessions = selectors.list_sessions(owner=request.user)
        used = session_usage(session_ids=[session.pk for session in sessions])
        return Response(SessionOut(sessions, many=True, context={"usage": used}).data)

    @extend_schema(
        request=SessionCreateIn,
        responses={201: SessionOut, **INVALID, **AUTH_ERRORS},
        description="Start a chat: a team's (`team`), which every member of the team sees, "
        "reads and writes at every door, or one of your own. Its `key` opens it at "
        "`/ws/chat/<key>/`, `/c/<key>/` and the other session routes.",
    )
    def post(self, request: Request) -> Response:
        data = SessionCreateIn(data=request.data)
        data.is_valid(raise_exception=True)
        slug, title = data.validated_data.get("team"), data.validated_data.get("title", "")
        if slug is None:
            session = services.get_or_create_session(
                key=f"web:{uuid.uuid4().hex[:20]}", owner=request.user
            )
            if title:
                services.rename_session(session=session, title=title)
        else:
            team = Team.objects.filter(slug=slug, group__user=request.user).first()
            if team is None:
                raise ValidationError({"team": [f"you are not a member of a team '{slug}'"]})
            session = services.create_team_chat(team=team.group, title=title)
        return Response(SessionOut(session).data, status=201)


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
        data = SessionUpdateIn(data=request.data, context={AS_READ: SessionOut(session).data})
        data.is_valid(raise_exception=True)
        fields = data.validated_data
        allowed = fields.get("allowed_tools")
        if allowed is not None and not set(allowed) <= set(session.allowed_tools):
            raise ValidationError(
                {
                    "allowed_tools": [
                        "a tool is allowed in a session by answering one of its calls with "
                        '"always"; here you may only take tools off the list'
                    ]
                }
            )
        if "title" in fields:
            services.rename_session(session=session, title=fields["title"])
        services.set_session_tools(
            session=session, approve_tools=fields.get("approve_tools"), allowed_tools=allowed
        )
        return Response(SessionOut(session).data)

    @extend_schema(
        responses={204: None, **AUTH_ERRORS, **NOT_FOUND},
        description="Delete the session with its messages and tasks. A running turn stops "
        "and the chat's open sockets close.",
    )
    def delete(self, request: Request, key: str) -> Response:
        services.delete_session(session=deletable_session(request, key))
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
