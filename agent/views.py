"""The chat page."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from agent.conf import agent_settings
from agent.consumers import CHAT_ID


@login_required
def chat(request: HttpRequest, chat_id: str = "") -> HttpResponse:
    if chat_id and not CHAT_ID.match(chat_id):
        raise Http404("no such chat")
    context = {
        "chat_id": chat_id,
        "ws_path_prefix": "/ws/chat/",
        "default_model": agent_settings().model,
        "admin_url": reverse("admin:index"),
        "logout_url": reverse("logout"),
        "login_url": reverse("login"),
        "sessions_api_url": "/api/sessions",
    }
    return render(request, "chat.html", context)
