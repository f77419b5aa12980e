"""The site's error handlers (handler400/403/404/500): JSON under /api/, a plain page of the
site elsewhere, and never a word about the server in either.

Django calls them only with DEBUG off; with it on it shows its technical pages instead,
except under /api/, whose views answer their own errors (see `agent.api.errors`).
"""

from __future__ import annotations

import logging

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template import loader
from django.utils.html import escape

from agent.api.errors import BAD_REQUEST, FORBIDDEN, NOT_FOUND, SERVER_ERROR, body_too_large

logger = logging.getLogger(__name__)

API_PREFIX = "/api/"


def is_api(request: HttpRequest) -> bool:
    return request.path_info.startswith(API_PREFIX) or request.path_info == API_PREFIX[:-1]


def page(template_name: str, status: int, title: str) -> HttpResponse:
    """The page `template_name`, rendered without the request: the context processors it
    would run (the user, the session) may be what failed."""
    try:
        body = loader.get_template(template_name).render({})
    except Exception:
        logger.exception("The error page %s failed to render", template_name)
        title = escape(title)
        body = f"<!doctype html><title>{title}</title><h1>{title}</h1>"
    return HttpResponse(body, status=status)


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api(request):
        too_large = isinstance(exception, RequestDataTooBig)
        return JsonResponse(body_too_large() if too_large else BAD_REQUEST, status=400)
    return page("400.html", 400, "Bad request")


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api(request):
        return JsonResponse(FORBIDDEN, status=403)
    return page("403.html", 403, "Forbidden")


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api(request):
        return JsonResponse(NOT_FOUND, status=404)
    return page("404.html", 404, "Page not found")


def server_error(request: HttpRequest) -> HttpResponse:
    if is_api(request):
        return JsonResponse(SERVER_ERROR, status=500)
    return page("500.html", 500, "Server error")
