"""The site's error handlers (handler400/403/404/500): JSON under /api/, a plain page of the
site elsewhere, and never a word about the server in either.

Django calls them only with DEBUG off; with it on it shows its technical pages instead,
except under /api/, whose views answer their own errors (see `agent.doors.api.error_responses`).
"""

from __future__ import annotations

import logging

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import REASON_NO_CSRF_COOKIE
from django.template import loader
from django.utils.html import escape

from agent.doors.api.error_responses import (
    BAD_REQUEST,
    FORBIDDEN,
    NOT_FOUND,
    SERVER_ERROR,
    body_too_large,
)

logger = logging.getLogger(__name__)

API_PREFIX = "/api/"


def is_api(request: HttpRequest) -> bool:
    return request.path_info.startswith(API_PREFIX) or request.path_info == API_PREFIX[:-1]


def page(status: int, heading: str, message: str, *, alert: bool = False) -> HttpResponse:
    """The site's error page, rendered without the request: the context processors it
    would run (the user, the session) may be what failed."""
    context = {"heading": heading, "message": message, "alert": alert}
    try:
        body = loader.get_template("error.html").render(context)
    except Exception:
        logger.exception("The error page for %s failed to render", status)
        body = f"<!doctype html><title>{escape(heading)}</title><h1>{escape(heading)}</h1>"
    return HttpResponse(body, status=status)


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api(request):
        too_large = isinstance(exception, RequestDataTooBig)
        return JsonResponse(body_too_large() if too_large else BAD_REQUEST, status=400)
    return page(
        400,
        "Bad request",
        "The server could not accept what your browser sent, perhaps because it was too large.",
        alert=True,
    )


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api(request):
        return JsonResponse(FORBIDDEN, status=403)
    return page(403, "Forbidden", "You do not have permission to open this page.", alert=True)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """CSRF_FAILURE_VIEW: the reason stays on the server."""
    if is_api(request):
        return JsonResponse(FORBIDDEN, status=403)
    if reason == REASON_NO_CSRF_COOKIE:
        message = (
            "This form needs a cookie your browser did not send. Allow cookies for this "
            "site, reload the page and try again."
        )
    else:
        message = (
            "This form was sent from a page that is too old or from another site. Reload "
            "the page and try again."
        )
    return page(403, "Form expired", message, alert=True)


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api(request):
        return JsonResponse(NOT_FOUND, status=404)
    return page(404, "Page not found", "There is no page at this address.")


def server_error(request: HttpRequest) -> HttpResponse:
    if is_api(request):
        return JsonResponse(SERVER_ERROR, status=500)
    return page(
        500,
        "Server error",
        "The server failed to answer this request. It has been logged; please try again in "
        "a moment.",
        alert=True,
    )
