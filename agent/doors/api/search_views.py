"""The REST endpoint of search through a user's chats: titles and the words of messages, each
result naming the session and the message, which the chat page opens at that message."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agent.doors.api.schema import AUTH_ERRORS, INVALID
from sessions_app import search

DEFAULT_LIMIT = 20
MAX_LIMIT = 50


class SearchQueryIn(serializers.Serializer):
    q = serializers.CharField(
        max_length=search.MAX_QUERY_CHARS,
        help_text=f"The words to look for (1 to {search.MAX_QUERY_CHARS} characters, at least "
        "one letter or digit): every one must be there, each as the start of a word (on "
        "PostgreSQL) or anywhere in the text (on SQLite), case aside.",
    )
    limit = serializers.IntegerField(
        min_value=1,
        max_value=MAX_LIMIT,
        default=DEFAULT_LIMIT,
        help_text=f"Results at most (1 to {MAX_LIMIT}, default {DEFAULT_LIMIT}).",
    )
    archived = serializers.BooleanField(
        default=False,
        help_text="`true`: messages that `/new`, an edit or a regeneration archived are found "
        "too, marked `archived`. Without it, only the live conversations.",
    )

    def validate_q(self, value: str) -> str:
        if not search.terms_of(value):
            raise serializers.ValidationError("Give at least one word (letters or digits).")
        return value


class SearchHitOut(serializers.Serializer):
    session = serializers.CharField(
        help_text="The session's key; the chat page opens it at `/c/<chat>/` (see sessions)."
    )
    title = serializers.CharField(help_text="The chat's title (empty if it has none).")
    message_id = serializers.IntegerField(
        allow_null=True,
        help_text="The message that matched (its `id` in the session's messages and in the "
        "socket's `history` frames); null when the chat's title did.",
    )
    run_id = serializers.CharField(allow_null=True, help_text="The turn the message is of.")
    role = serializers.CharField(
        allow_null=True, help_text="`user` or `assistant`; null for a title."
    )
    snippet = serializers.CharField(help_text="The matching text around the first word found.")
    created = serializers.DateTimeField(
        help_text="When the message was written (a title: when the chat was last active)."
    )
    archived = serializers.BooleanField()


class Search(APIView):
    @extend_schema(
        operation_id="search",
        parameters=[SearchQueryIn],
        responses={200: SearchHitOut(many=True), **INVALID, **AUTH_ERRORS},
        description="Search your chats (the sessions `GET /api/sessions` lists): first the "
        "chats whose title has every word, then the messages that do, yours and the "
        "agent's replies (not tool output), best match first on PostgreSQL, newest first "
        "elsewhere. An empty or blank `q`, or one longer than 200 characters, is a 400.",
    )
    def get(self, request: Request) -> Response:
        # A plain dict: a repeated parameter is one value, as every other endpoint reads it.
        query = SearchQueryIn(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        data: dict[str, Any] = query.validated_data
        hits = search.search(
            owner=request.user, query=data["q"], limit=data["limit"], archived=data["archived"]
        )
        return Response(SearchHitOut(hits, many=True).data)
