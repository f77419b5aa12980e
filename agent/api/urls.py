"""API routes. Each answers with and without a trailing slash, never through a redirect."""

from __future__ import annotations

from typing import Any

from django.urls import URLPattern, re_path

from agent.api import views


def route(pattern: str, view: Any, name: str) -> URLPattern:
    return re_path(rf"^{pattern}/?$", view, name=name)


KEY = r"(?P<key>[^/]+)"

urlpatterns = [
    route("sessions", views.SessionList.as_view(), "session-list"),
    route(f"sessions/{KEY}", views.SessionDetail.as_view(), "session-detail"),
    route(f"sessions/{KEY}/messages", views.SessionMessages.as_view(), "session-messages"),
]
