"""Errors as JSON: every failure a client can cause is a 4xx that says what was wrong."""

from __future__ import annotations

import logging
from typing import Any

from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from agent.errors import ModelNotConfigured, TurnError

logger = logging.getLogger(__name__)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ModelNotConfigured):
        return Response({"detail": str(exc)}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
    if isinstance(exc, TurnError):
        return Response({exc.field or "detail": [str(exc)]}, status=status.HTTP_400_BAD_REQUEST)
    response = drf_exception_handler(exc, context)
    if response is None:
        # Not a client error: log it whole, answer without internals.
        logger.exception("API request failed", exc_info=exc)
    return response
