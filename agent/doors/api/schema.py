"""drf-spectacular hooks."""

from __future__ import annotations

from typing import Any

from drf_spectacular.renderers import (
    OpenApiJsonRenderer,
    OpenApiJsonRenderer2,
    OpenApiYamlRenderer,
    OpenApiYamlRenderer2,
)
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse
from drf_spectacular.views import SpectacularAPIView
from rest_framework import serializers


def drop_slashed_aliases(endpoints: list[tuple[str, Any, str, Any]], **kwargs: Any) -> list[Any]:
    """Every route also answers with a trailing slash; document each one once."""
    return [endpoint for endpoint in endpoints if not endpoint[0].endswith("/")]


class SchemaView(SpectacularAPIView):
    """The OpenAPI schema: JSON unless YAML is asked for (`?format=yaml`, or `Accept:
    application/yaml`), so that a browser shows it rather than downloading a YAML file."""

    renderer_classes = [
        OpenApiJsonRenderer2,
        OpenApiJsonRenderer,
        OpenApiYamlRenderer,
        OpenApiYamlRenderer2,
    ]


class ErrorOut(serializers.Serializer):
    detail = serializers.CharField()


_error = OpenApiResponse(ErrorOut, description="What went wrong, in `detail`.")
_invalid = OpenApiResponse(
    OpenApiTypes.OBJECT, description="Each bad field with its reasons: `{field: [reason]}`."
)

# Answers every authenticated endpoint may give besides its own.
AUTH_ERRORS = {401: _error, 403: _error}
NOT_FOUND = {404: OpenApiResponse(ErrorOut, description="No such object of yours.")}
INVALID = {400: _invalid}
BAD_CURSOR = {404: OpenApiResponse(ErrorOut, description="A cursor that names no page.")}
THROTTLED = {
    429: OpenApiResponse(
        ErrorOut, description="Too many tasks, or your daily budget is spent; see Retry-After."
    )
}
NO_MODEL = {503: OpenApiResponse(ErrorOut, description="No model is configured on the server.")}
