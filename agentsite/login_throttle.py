"""Failed sign-ins, throttled per account and per address (django-axes).

axes counts wrong passwords by username and by client address (AXES_LOCKOUT_PARAMETERS)
and refuses every password, the right one too, for one it has locked until the cool-off
has passed. What this module changes of axes (the settings point at each piece):

- an address may fail more often than an account (`AGENT_LOGIN_ADDRESS_FAILURE_LIMIT`):
  several people share an office's address, and an account is what a guesser aims at;
- a successful sign-in clears only that account's failures from that address, where axes
  would clear every failure from the address, so that a guesser who owns one account could
  not clear the count against everybody else's by signing in to it now and then;
- the client's address is the one the site's own reverse proxies saw (`AGENT_PROXY_COUNT`);
- the locked-out page is the site's own, answered with 429 and Retry-After;
- an `authenticate()` call without a request (code in this process, such as the test
  client's `login()`) is not a visitor, and passes through to the password check.

The lockout page reads the same for every username, taken or not: axes counts failures by
the name as typed, so a name with no account is locked as soon as one with an account.
"""

from __future__ import annotations

import ipaddress
import logging
import math
from typing import Any

from axes.backends import AxesStandaloneBackend
from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username
from axes.models import AccessAttempt
from django.db.models import Sum
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from agent.conf import agent_settings

logger = logging.getLogger(__name__)

LOCKOUT_TEMPLATE = "registration/locked_out.html"


class LoginThrottleBackend(AxesStandaloneBackend):
    """axes' gate in front of the password check, for requests only."""

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> None:
        if request is None:
            # axes would raise ValueError; every door of the site passes its request, so
            # a call without one comes from this process and has no address to count.
            return None
        return super().authenticate(request, username, password, **kwargs)


class LoginThrottle(AxesDatabaseHandler):
    """axes' database handler with a limit of its own for the address, and a reset on
    success that leaves other accounts' failures alone."""

    def get_failures(self, request: HttpRequest, credentials: dict[str, Any] | None = None) -> int:
        # axes compares one number with AXES_FAILURE_LIMIT (the account's limit). The
        # address's count is shifted so that it reaches that limit exactly when it reaches
        # its own: locked when either the account or the address has failed too often.
        by_account, by_address = (
            attempts.aggregate(total=Sum("failures_since_start"))["total"] or 0
            for attempts in self.get_user_attempts(request, credentials)
        )
        conf = agent_settings()
        shift = conf.login_address_failure_limit - conf.login_failure_limit
        return max(int(by_account), int(by_address) - shift)

    def reset_user_attempts(
        self, request: HttpRequest, credentials: dict[str, Any] | None = None
    ) -> int:
        count, _ = AccessAttempt.objects.filter(
            username=get_client_username(request, credentials),
            ip_address=request.axes_ip_address,  # type: ignore[attr-defined]
        ).delete()
        return int(count)


def client_address(request: HttpRequest) -> str | None:
    """The address a failed sign-in counts against (AXES_CLIENT_IP_CALLABLE).

    With no proxy in front (AGENT_PROXY_COUNT=0) it is the connection's. Behind N proxies
    that each append the address they were reached from to X-Forwarded-For, it is the
    N-th entry from the right: what the outermost of them saw. Entries to the left of it
    came from the client, which could write anything there."""
    remote = request.META.get("REMOTE_ADDR") or None
    proxies = agent_settings().proxy_count
    if proxies <= 0:
        return remote
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
    if not hops:
        return remote
    # Fewer entries than proxies: the request came in past the outer ones, and the
    # leftmost entry is what the first proxy it met saw.
    hop = hops[max(len(hops) - proxies, 0)]
    try:
        return str(ipaddress.ip_address(hop))
    except ValueError:
        logger.warning("X-Forwarded-For holds %r where an address belongs", hop[:60])
        return remote


def wait_phrase(seconds: int) -> str:
    """'15 minutes', '1 hour', '30 seconds': how long the cool-off lasts, in words."""
    if seconds < 60:
        amount, unit = seconds, "second"
    elif seconds < 2 * 3600:
        amount, unit = math.ceil(seconds / 60), "minute"
    else:
        amount, unit = math.ceil(seconds / 3600), "hour"
    return f"{amount} {unit}{'' if amount == 1 else 's'}"


def lockout_response(
    request: HttpRequest, original_response: HttpResponse | None = None, *args: Any
) -> HttpResponse:
    """The page a locked-out sign-in gets (AXES_LOCKOUT_CALLABLE): 429 Too Many Requests,
    in the site's look, saying when to try again and nothing about the account."""
    seconds = agent_settings().login_cooloff
    response = TemplateResponse(
        request, LOCKOUT_TEMPLATE, {"wait": wait_phrase(seconds)}, status=429
    )
    response["Retry-After"] = str(seconds)
    return response.render()
