"""Errors as JSON: every failure a client can cause is a 4xx that says what was wrong, and
every other failure a 500 that says nothing of the server."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import BadRequest, RequestDataTooBig, SuspiciousOperation
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import status
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from agent.turn import ModelNotConfigured, OverBudget, TurnError

logger = logging.getLogger(__name__)

NOT_FOUND = {"detail": "Not found."}
BAD_REQUEST = {"detail": "Bad request."}
FORBIDDEN = {"detail": "You do not have permission to perform this action."}
SERVER_ERROR = {"detail": "Internal server error."}


def body_too_large() -> dict[str, str]:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return {"detail": f"The request body is too large: at most {limit} bytes are accepted."}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    response = _response_for(exc, context)
    request = context.get("request")
    if request is not None:
        # A view that renders HTML (the docs page) or YAML (the schema) answers its errors in
        # JSON too, like the rest of the API.
        request.accepted_renderer = JSONRenderer()
        request.accepted_media_type = JSONRenderer.media_type
    return response


def _response_for(exc: Exception, context: dict[str, Any]) -> Response:
    if isinstance(exc, ModelNotConfigured):
        return Response({"detail": str(exc)}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
    if isinstance(exc, OverBudget):
        headers = {"Retry-After": str(exc.retry_after)}
        return Response(
            {"detail": str(exc)}, status=status.HTTP_429_TOO_MANY_REQUESTS, headers=headers
        )
    if isinstance(exc, TurnError):
        return Response({exc.field or "detail": [str(exc)]}, status=status.HTTP_400_BAD_REQUEST)
    # Django raises these while reading the body (DRF's parsers read it through
    # `request.body`); left to Django they become its HTML 400 page, or with DEBUG its
    # technical page.
    if isinstance(exc, RequestDataTooBig):
        logger.warning("API request body too large: %s", exc)
        return Response(body_too_large(), status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, SuspiciousOperation | BadRequest):
        logger.warning("API bad request: %s", exc)
        return Response(BAD_REQUEST, status=status.HTTP_400_BAD_REQUEST)
    response = drf_exception_handler(exc, context)
    if response is not None:
        return response
    # Not a client error: log it whole, answer without internals (whatever DEBUG says).
    logger.exception("API request failed", exc_info=exc)
    set_rollback()
    return Response(SERVER_ERROR, status=status.HTTP_500_INTERNAL_SERVER_ERROR)


# It does nothing a forged request could abuse, and CSRF's refusal would be an HTML page.
@csrf_exempt
def not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    """Any path under /api/ that no route matches: a JSON 404, not Django's HTML page."""
    return JsonResponse(NOT_FOUND, status=status.HTTP_404_NOT_FOUND)
