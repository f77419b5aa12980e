"""`/api/tokens`: your named API tokens. Each works at every door (this API, the OpenAI
door, the chat socket) until it expires or you revoke it; its secret is shown once, when it
is made. Making and revoking one is recorded in the audit log, with you as who did it."""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any, TypeVar

from auditlog.context import auditlog_value, set_actor
from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agent.doors.api.schema import AUTH_ERRORS, INVALID, NOT_FOUND
from agent.doors.api.token_serializers import TokenCreatedOut, TokenIn, TokenOut
from teams_app import tokens
from teams_app.models import ApiToken

T = TypeVar("T")


def _as_actor(request: Request, write: Callable[[], T]) -> T:
    """`write` with the request's user as the audit log's actor. The audit middleware reads
    the user before DRF has authenticated a token, so a token's request would be logged as
    no one's. Run in a context of its own: django-auditlog's actor does not nest, and the
    middleware's own must be left as it was for it to clean up after."""
    outer: dict[str, Any] = auditlog_value.get(None) or {}

    def run() -> T:
        with set_actor(
            request.user,
            remote_addr=outer.get("remote_addr") or request.META.get("REMOTE_ADDR"),
            remote_port=outer.get("remote_port"),
        ):
            return write()

    return contextvars.copy_context().run(run)


def _token(request: Request, token_id: int) -> ApiToken:
    token = tokens.find_token(user=request.user, token_id=token_id)
    if token is None:
        raise Http404("no such token of yours")
    return token


class TokenList(APIView):
    @extend_schema(
        responses={200: TokenOut(many=True), **AUTH_ERRORS},
        description="Your named API tokens, newest first (expired ones too), without their "
        f"secrets. A person may have at most {tokens.MAX_TOKENS}.",
    )
    def get(self, request: Request) -> Response:
        return Response(TokenOut(tokens.list_tokens(user=request.user), many=True).data)

    @extend_schema(
        request=TokenIn,
        responses={201: TokenCreatedOut, **INVALID, **AUTH_ERRORS},
        description="A new token: its secret (`token`) is in this answer and nowhere else, "
        "ever. Copy it now.",
    )
    def post(self, request: Request) -> Response:
        data = TokenIn(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            token, secret = _as_actor(
                request,
                lambda: tokens.issue_token(
                    user=request.user,
                    name=data.validated_data["name"],
                    expires=data.validated_data.get("expires"),
                ),
            )
        except tokens.TooManyTokens as full:
            raise serializers.ValidationError({"detail": str(full)}) from None
        made = {field: getattr(token, field) for field in ("id", "name", "expires", "created")}
        return Response(TokenCreatedOut({**made, "token": secret}).data, status=201)


class TokenDetail(APIView):
    @extend_schema(
        responses={204: None, **AUTH_ERRORS, **NOT_FOUND},
        description="Revoke the token: every door refuses it at once, and the chats opened "
        "with it close.",
    )
    def delete(self, request: Request, token_id: int) -> Response:
        token = _token(request, token_id)
        _as_actor(request, lambda: tokens.revoke_token(token=token))
        return Response(status=204)
