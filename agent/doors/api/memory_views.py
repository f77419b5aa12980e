"""`/api/memory`: what the agent remembers for you. `session` null is your long-term memory,
shared by all your sessions; a session key marks a summary of that session's history."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agent.doors.api.known_fields import AS_READ, KnownFieldsOnly
from agent.doors.api.pagination import LinkedCursorPagination, paginated_response
from agent.doors.api.schema import AUTH_ERRORS, BAD_CURSOR, INVALID, NOT_FOUND
from agent.doors.api.serializers import SESSION_KEY
from sessions_app import memory as memories
from sessions_app import selectors
from sessions_app.models import Memory, Session


class MemoryOut(serializers.ModelSerializer):
    session = serializers.CharField(source="session.key", allow_null=True, default=None)

    class Meta:
        model = Memory
        fields = ["id", "session", "content", "created", "updated"]


class MemoryIn(KnownFieldsOnly):
    session = serializers.RegexField(SESSION_KEY, required=False, allow_null=True)
    content = serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=100_000)


class MemoryUpdateIn(KnownFieldsOnly):
    content = serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=100_000)


def _memory(request: Request, memory_id: int) -> Memory:
    memory = memories.find_memory(memory_id=memory_id, owner=request.user)
    if memory is None:
        raise Http404("no such memory")
    return memory


def _session(request: Request, key: str | None) -> Session | None:
    if key is None:
        return None
    session = selectors.find_session(key=key, owner=request.user)
    if session is None:
        raise serializers.ValidationError({"session": ["no such session of yours"]})
    return session


class MemoryList(APIView):
    # Not `pagination_class`: the schema would wrap the list in an envelope it does not have.
    pages = LinkedCursorPagination

    @extend_schema(
        parameters=pages.query_parameters(),
        responses={200: MemoryOut(many=True), **AUTH_ERRORS, **BAD_CURSOR},
        description="Your memories, newest first, a page at a time; the `Link` header's "
        '`rel="next"` leads to older ones.',
    )
    def get(self, request: Request) -> Response:
        return paginated_response(
            pagination=self.pages(),
            serializer_class=MemoryOut,
            queryset=memories.list_memories(owner=request.user),
            request=request,
            view=self,
        )

    @extend_schema(request=MemoryIn, responses={201: MemoryOut, **INVALID, **AUTH_ERRORS})
    def post(self, request: Request) -> Response:
        data = MemoryIn(data=request.data)
        data.is_valid(raise_exception=True)
        session = _session(request, data.validated_data.get("session"))
        try:
            memory = memories.create_memory(
                owner=request.user, session=session, content=data.validated_data["content"]
            )
        except memories.MemoryTaken:
            raise serializers.ValidationError(
                {"session": ["you have a long-term memory already: update that one"]}
            ) from None
        return Response(MemoryOut(memory).data, status=201)


class MemoryDetail(APIView):
    @extend_schema(responses={200: MemoryOut, **AUTH_ERRORS, **NOT_FOUND})
    def get(self, request: Request, memory_id: int) -> Response:
        return Response(MemoryOut(_memory(request, memory_id)).data)

    @extend_schema(
        request=MemoryUpdateIn, responses={200: MemoryOut, **INVALID, **AUTH_ERRORS, **NOT_FOUND}
    )
    def patch(self, request: Request, memory_id: int) -> Response:
        memory = _memory(request, memory_id)
        data = MemoryUpdateIn(data=request.data, context={AS_READ: MemoryOut(memory).data})
        data.is_valid(raise_exception=True)
        updated = memories.update_memory(memory=memory, content=data.validated_data["content"])
        return Response(MemoryOut(updated).data)

    @extend_schema(
        request=MemoryUpdateIn, responses={200: MemoryOut, **INVALID, **AUTH_ERRORS, **NOT_FOUND}
    )
    def put(self, request: Request, memory_id: int) -> Response:
        return self.patch(request, memory_id)

    @extend_schema(responses={204: None, **AUTH_ERRORS, **NOT_FOUND})
    def delete(self, request: Request, memory_id: int) -> Response:
        memories.delete_memory(memory=_memory(request, memory_id))
        return Response(status=204)
