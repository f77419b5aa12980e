"""The chat page."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from agent.conf import agent_settings
from sessions_app import keys


@login_required
def chat(request: HttpRequest, key: str = "") -> HttpResponse:
    """The page; `key` is the session its URL names (see the `chat` converter), "" at `/`."""
    context = {
        "chat_id": keys.path_for_key(key) if key else "",
        # The page checks chat paths with the server's own rule instead of a copy of it.
        "chat_pattern": keys.CHAT_PATH_PATTERN,
        "ws_path_prefix": "/ws/chat/",
        "default_model": agent_settings().model,
        "admin_url": reverse("admin:index"),
        "logout_url": reverse("logout"),
        "login_url": reverse("login"),
        "sessions_api_url": "/api/sessions",
        "search_api_url": "/api/search",
    }
    return render(request, "chat.html", context)
