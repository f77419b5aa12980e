"""The sign-in throttle's parts, in this process: which address a failure counts against,
how staff see and clear a lockout in the admin, and that code signing in without a request
(the test client's `login()`) still works."""

from __future__ import annotations

from typing import Any

import pytest
from axes.models import AccessAttempt
from django.contrib.auth.models import User
from django.test import Client, RequestFactory

from agentsite.login_throttle import client_address, wait_phrase
from tests.conftest import clean_env, python

WRONG = "not-the-password"


@pytest.fixture
def throttle(settings: Any) -> Any:
    settings.AGENT_LOGIN_FAILURE_LIMIT = settings.AXES_FAILURE_LIMIT = 3
    settings.AGENT_LOGIN_ADDRESS_FAILURE_LIMIT = 5
    return settings


def post_login(username: str, password: str, path: str = "/accounts/login/", **extra: str) -> int:
    response = Client().post(path, {"username": username, "password": password}, **extra)
    return int(response.status_code)


def request_from(remote: str, forwarded: str | None = None) -> Any:
    extra = {"REMOTE_ADDR": remote}
    if forwarded is not None:
        extra["HTTP_X_FORWARDED_FOR"] = forwarded
    return RequestFactory().post("/accounts/login/", **extra)


@pytest.mark.parametrize(
    ("proxies", "remote", "forwarded", "expected"),
    [
        # No proxy: the header is the client's own writing and counts for nothing.
        (0, "192.0.2.1", "10.0.0.1", "192.0.2.1"),
        (1, "127.0.0.1", "10.0.0.1", "10.0.0.1"),
        # Behind one proxy, entries left of the one it added are the client's.
        (1, "127.0.0.1", "6.6.6.6, 10.0.0.1", "10.0.0.1"),
        (2, "127.0.0.1", "6.6.6.6, 10.0.0.1, 172.16.0.1", "10.0.0.1"),
        # Came in past the outer proxy: the first proxy it met wrote the only entry.
        (2, "127.0.0.1", "10.0.0.1", "10.0.0.1"),
        (1, "127.0.0.1", None, "127.0.0.1"),
        (1, "127.0.0.1", "not-an-address", "127.0.0.1"),
        (1, "127.0.0.1", "2001:DB8::1", "2001:db8::1"),
    ],
)
def test_the_address_a_failure_counts_against(
    settings: Any, proxies: int, remote: str, forwarded: str | None, expected: str
) -> None:
    settings.AGENT_PROXY_COUNT = proxies
    assert client_address(request_from(remote, forwarded)) == expected


def test_without_a_proxy_a_forged_header_spreads_no_failures(
    throttle: Any, db: None, ada: User
) -> None:
    throttle.AGENT_PROXY_COUNT = 0
    statuses = [
        post_login(f"guess-{n}", WRONG, HTTP_X_FORWARDED_FOR=f"10.0.0.{n}") for n in range(5)
    ]
    assert statuses == [200, 200, 200, 200, 429]
    assert post_login("ada", "pw-ada-123") == 429


def test_the_wait_in_words() -> None:
    assert [wait_phrase(s) for s in (1, 30, 60, 61, 900, 3600, 7200, 86400)] == [
        "1 second",
        "30 seconds",
        "1 minute",
        "2 minutes",
        "15 minutes",
        "60 minutes",
        "2 hours",
        "24 hours",
    ]


def test_staff_see_and_clear_a_lockout_in_the_admin(throttle: Any, db: None, ada: User) -> None:
    assert [post_login("ada", WRONG) for _ in range(3)] == [200, 200, 429]
    assert post_login("ada", "pw-ada-123") == 429

    staff = Client()
    staff.force_login(User.objects.create_user("root", is_staff=True, is_superuser=True))
    listing = staff.get("/admin/axes/accessattempt/")
    assert listing.status_code == 200 and "ada" in listing.content.decode()
    attempt = AccessAttempt.objects.get(username="ada")
    cleared = staff.post(f"/admin/axes/accessattempt/{attempt.pk}/delete/", {"post": "yes"})
    assert cleared.status_code == 302
    assert post_login("ada", "pw-ada-123") == 302


def test_the_test_clients_login_still_checks_the_password(
    throttle: Any, db: None, ada: User
) -> None:
    """`Client.login()` authenticates without a request, which axes' own backend refuses
    with ValueError; ours lets it through to the password check, uncounted."""
    client = Client()
    assert client.login(username="ada", password=WRONG) is False
    assert client.login(username="ada", password="pw-ada-123") is True
    assert client.get("/").status_code == 200
    assert not AccessAttempt.objects.exists()


def test_a_limit_of_zero_turns_the_throttle_off(settings: Any, db: None, ada: User) -> None:
    code = "import django; django.setup(); from django.conf import settings as s; "
    code += "print(s.AXES_ENABLED, s.AXES_FAILURE_LIMIT, s.AXES_COOLOFF_TIME.total_seconds())"
    env = {
        **clean_env(),
        "AGENT_LOGIN_COOLOFF": "60",
        "DJANGO_SETTINGS_MODULE": "agentsite.settings",
    }
    assert python(code, env).stdout.split() == ["True", "5", "60.0"]
    done = python(code, {**env, "AGENT_LOGIN_FAILURE_LIMIT": "0"})
    assert done.stdout.split()[0] == "False", done.stderr
    refused = python(code, {**env, "AGENT_LOGIN_COOLOFF": "0"})
    assert "AGENT_LOGIN_COOLOFF must be at least 1" in refused.stderr

    settings.AXES_ENABLED = False
    assert {post_login("ada", WRONG) for _ in range(8)} == {200}
    assert post_login("ada", "pw-ada-123") == 302
