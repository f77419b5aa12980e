"""The chat page, and the icon browsers ask for at `/favicon.ico`."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.templatetags.static import static
from django.urls import reverse
from django.views.decorators.cache import cache_control

from agent.turn import settings_for
from sessions_app import keys
from sessions_app.selectors import find_session


@login_required
def chat(request: HttpRequest, key: str = "") -> HttpResponse:
    """The page; `key` is the session its URL names (see the `chat` converter), "" at `/`.
    A team chat's page opens to the team's members alone (404 for anyone else, as the
    socket and the API answer)."""
    if key and keys.is_team_key(key) and find_session(key=key, owner=request.user) is None:
        raise Http404("no such chat")
    # The person's: the picker offers the models their teams allow.
    conf = settings_for(request.user)
    context = {
        "chat_id": keys.path_for_key(key) if key else "",
        # The page checks chat paths with the server's own rule instead of a copy of it.
        "chat_pattern": keys.CHAT_PATH_PATTERN,
        "ws_path_prefix": "/ws/chat/",
        "default_model": conf.model,
        # The ids the header's picker offers (model ids hold no comma): AGENT_MODEL first.
        "models": ",".join(conf.models),
        "admin_url": reverse("admin:index"),
        "logout_url": reverse("logout"),
        "login_url": reverse("login"),
        "sessions_api_url": "/api/sessions",
        "search_api_url": "/api/search",
    }
    return render(request, "chat.html", context)


@cache_control(public=True, max_age=86_400)
def favicon(request: HttpRequest) -> HttpResponseRedirect:
    """The site's icon where browsers (and the admin's pages, which name none) look for it
    by default: the SVG the pages link. Not permanent: the static file's address may change."""
    return HttpResponseRedirect(static("chat/favicon.svg"))
