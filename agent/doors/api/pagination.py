"""Paging of long lists: a chat's messages read from the latest backwards, and others.

The body stays the plain list the API has always answered; the way to the neighbouring
pages travels in a `Link` header (RFC 8288, as GitHub's API does), so a client that reads
the list as before keeps working and one that wants more follows the links.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework.exceptions import NotFound
from rest_framework.pagination import Cursor, CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer
from rest_framework.views import APIView


class LinkedCursorPagination(CursorPagination):
    """Cursor pages, newest first by id (unique, never changing), the body a plain list and
    the neighbouring pages in a `Link` header: `rel="next"` to older items, `rel="prev"`
    back to newer ones."""

    ordering = "-id"
    page_size = 100
    page_size_query_param = "page_size"
    page_size_query_description = "Items per page (default 100, at most 500)."
    max_page_size = 500
    cursor_query_description = "The page a link of the `Link` header points to."
    # Which relation each of DRF's links is answered as.
    rel_of_next, rel_of_previous = "next", "prev"

    @classmethod
    def query_parameters(cls) -> list[OpenApiParameter]:
        """The schema's description of the page's query parameters."""
        return [
            OpenApiParameter("cursor", OpenApiTypes.STR, description=cls.cursor_query_description),
            OpenApiParameter(
                "page_size", OpenApiTypes.INT, description=cls.page_size_query_description
            ),
        ]

    def get_paginated_response(self, data: Any) -> Response:
        response = Response(data)
        links = [
            f'<{url}>; rel="{rel}"'
            for url, rel in (
                (self.get_next_link(), self.rel_of_next),
                (self.get_previous_link(), self.rel_of_previous),
            )
            if url
        ]
        if links:
            response["Link"] = ", ".join(links)
        return response

    def decode_cursor(self, request: Request) -> Cursor | None:
        cursor = super().decode_cursor(request)
        # A hand-made position that is not an id would fail in the query, as a 500.
        if cursor is not None and cursor.position is not None and not _is_id(cursor.position):
            raise NotFound(self.invalid_cursor_message)
        return cursor


class LatestFirstCursorPagination(LinkedCursorPagination):
    """Cursor pages of messages where the first page is the latest one.

    A chat client opens a conversation at its end and scrolls back, so a plain GET must
    answer the newest messages. DRF's cursor pages always start at the head of their
    ordering and cannot be told to start at the tail, so the query runs newest first and
    each page is turned around on the way out: its items read oldest to newest, DRF's
    `next` (towards older messages) is answered as `prev` and its `previous` (towards newer
    ones) as `next`.
    """

    page_size_query_description = "Messages per page (default 100, at most 500)."
    rel_of_next, rel_of_previous = "prev", "next"

    def paginate_queryset(
        self, queryset: QuerySet[Any], request: Request, view: APIView | None = None
    ) -> list[Any] | None:
        page = super().paginate_queryset(queryset, request, view)
        # A reversed copy: DRF works out its links from `self.page` as it stands.
        return None if page is None else list(reversed(page))


def _is_id(position: str) -> bool:
    return position.isascii() and position.isdigit() and int(position) < 2**63


def paginated_response(
    *,
    pagination: CursorPagination,
    serializer_class: type[BaseSerializer[Any]],
    queryset: QuerySet[Any],
    request: Request,
    view: APIView,
) -> Response:
    """One page of `queryset`, serialized, with the paginator's links."""
    page: Sequence[Any] | None = pagination.paginate_queryset(queryset, request, view=view)
    if page is None:  # only when the paginator has no page size
        return Response(serializer_class(queryset, many=True).data)
    return pagination.get_paginated_response(serializer_class(page, many=True).data)
