"""Wrong passwords are throttled, over real HTTP against a daphne process of the site: too
many for one account lock that account (its right password too) from every address, too
many from one address lock that address for every account, a sign-in clears its own
failures and no one else's, the admin's sign-in counts the same, and the lock lifts after
the cool-off. The site sits behind one reverse proxy here (AGENT_PROXY_COUNT=1), which the
tests play by sending the X-Forwarded-For header that proxy would."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

import httpx
import pytest

from tests.conftest import LOGIN

pytestmark = pytest.mark.django_db(transaction=True)

ACCOUNT_LIMIT = 3
ADDRESS_LIMIT = 5
WRONG = "not-the-password"
SIGNED_IN, REFUSED, LOCKED = "signed in", "wrong password", "locked out"


@pytest.fixture
def cooloff() -> int:
    """Seconds a lock lasts; a test parametrizes it to see one lift."""
    return 900


@pytest.fixture
def site_env(site_env: dict[str, str], cooloff: int) -> dict[str, str]:
    site_env.update(
        {
            "AGENT_LOGIN_FAILURE_LIMIT": str(ACCOUNT_LIMIT),
            "AGENT_LOGIN_ADDRESS_FAILURE_LIMIT": str(ADDRESS_LIMIT),
            "AGENT_LOGIN_COOLOFF": str(cooloff),
            "AGENT_PROXY_COUNT": "1",
        }
    )
    return site_env


@dataclass
class Answer:
    outcome: str
    response: httpx.Response


def sign_in(
    site: str,
    username: str,
    password: str,
    *,
    address: str,
    path: str = "/accounts/login/",
    forwarded_for: str | None = None,
) -> Answer:
    """One visitor's sign-in through the form at `path`, from `address` as the proxy
    reports it: a browser of its own that fetches the form (for the CSRF cookie) and posts it."""
    headers = {"X-Forwarded-For": forwarded_for or address}
    with httpx.Client(base_url=site, headers=headers, timeout=60) as browser:
        form = browser.get(path)
        assert form.status_code == 200, form.text[:300]
        response = browser.post(
            path,
            data={
                "csrfmiddlewaretoken": browser.cookies["csrftoken"],
                "username": username,
                "password": password,
            },
        )
    if response.status_code == 302:
        return Answer(SIGNED_IN, response)
    if response.status_code == 429:
        return Answer(LOCKED, response)
    assert response.status_code == 200, response.text[:500]
    assert "errornote" in response.text or "notice-error" in response.text
    return Answer(REFUSED, response)


def outcomes(site: str, tries: list[tuple[str, str, str]], path: str = "/accounts/login/") -> list:
    return [sign_in(site, u, p, address=a, path=path).outcome for u, p, a in tries]


def assert_lockout_page(answer: Answer, *, wait: str) -> str:
    """The site's own page, 429 with Retry-After, saying when to try again; its text."""
    response = answer.response
    assert response.status_code == 429
    assert response.headers["content-type"].startswith("text/html")
    assert int(response.headers["retry-after"]) > 0
    assert "brand-name" in response.text and "/static/chat/base.css" in response.text
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", response.text))
    assert f"try again in {wait}" in text, text
    return text


def test_wrong_passwords_lock_the_account_from_every_address(live_site: str) -> None:
    user, right = LOGIN
    # Each from an address of its own: the account's count, not an address's, locks it.
    tries = [(user, WRONG, f"198.51.100.{n}") for n in range(1, ACCOUNT_LIMIT + 1)]
    assert outcomes(live_site, tries) == [REFUSED] * (ACCOUNT_LIMIT - 1) + [LOCKED]

    locked = sign_in(live_site, user, right, address="198.51.100.99")
    assert locked.outcome == LOCKED, "the right password got in during the lockout"
    text = assert_lockout_page(locked, wait="15 minutes")
    assert user not in text
    assert "sessionid" not in locked.response.cookies

    # A name with no account locks the same way, with the same page: the lockout tells
    # nobody whether an account exists.
    nobody = "nobody-here"
    tries = [(nobody, WRONG, f"198.51.100.{n}") for n in range(11, 11 + ACCOUNT_LIMIT)]
    assert outcomes(live_site, tries)[-1] == LOCKED
    also_locked = sign_in(live_site, nobody, right, address="198.51.100.98")
    assert also_locked.outcome == LOCKED
    assert also_locked.response.text == locked.response.text


def test_wrong_passwords_over_many_accounts_lock_the_address(live_site: str) -> None:
    user, right = LOGIN
    attacker = "203.0.113.7"
    # One try per name, so that no account reaches its own limit.
    tries = [(f"guess-{n}", WRONG, attacker) for n in range(ADDRESS_LIMIT)]
    assert outcomes(live_site, tries) == [REFUSED] * (ADDRESS_LIMIT - 1) + [LOCKED]

    # The address is locked for every account, the right password too...
    assert sign_in(live_site, user, right, address=attacker).outcome == LOCKED
    assert sign_in(live_site, "guess-new", WRONG, address=attacker).outcome == LOCKED
    # ...and only the address: the same account signs in from another one.
    assert sign_in(live_site, user, right, address="203.0.113.8").outcome == SIGNED_IN


def test_the_client_cannot_pick_its_address_behind_the_proxy(live_site: str) -> None:
    """Entries a client writes into X-Forwarded-For stand left of the one the proxy adds:
    each try here claims another address, and all of them count against the real one."""
    real = "192.0.2.50"
    answers = [
        sign_in(live_site, f"guess-{n}", WRONG, address=real, forwarded_for=f"10.9.9.{n}, {real}")
        for n in range(ADDRESS_LIMIT)
    ]
    assert [a.outcome for a in answers][-1] == LOCKED
    assert sign_in(live_site, LOGIN[0], LOGIN[1], address=real).outcome == LOCKED


def test_a_sign_in_clears_its_own_failures_and_no_one_elses(live_site: str) -> None:
    user, right = LOGIN
    # Signing in to an account of one's own leaves the failures against another account
    # from the same address standing, so it cannot buy more guesses at that one.
    mallory = "198.51.100.201"
    victim_tries = [("victim", WRONG, mallory)] * (ACCOUNT_LIMIT - 1)
    assert outcomes(live_site, victim_tries) == [REFUSED] * (ACCOUNT_LIMIT - 1)
    assert sign_in(live_site, user, right, address=mallory).outcome == SIGNED_IN
    assert sign_in(live_site, "victim", WRONG, address=mallory).outcome == LOCKED

    home = "198.51.100.200"
    below = [(user, WRONG, home)] * (ACCOUNT_LIMIT - 1)
    # Failures short of the limit, a sign-in, the same failures again: never locked...
    for _ in range(2):
        assert outcomes(live_site, below) == [REFUSED] * (ACCOUNT_LIMIT - 1)
        assert sign_in(live_site, user, right, address=home).outcome == SIGNED_IN
    # ...yet counted from zero after each sign-in, up to the limit.
    tries = [(user, WRONG, home)] * ACCOUNT_LIMIT
    assert outcomes(live_site, tries) == [REFUSED] * (ACCOUNT_LIMIT - 1) + [LOCKED]


def test_the_admin_sign_in_is_throttled_too(live_site: str) -> None:
    user, right = LOGIN
    tries = [(user, WRONG, f"192.0.2.{n}") for n in range(1, ACCOUNT_LIMIT + 1)]
    assert outcomes(live_site, tries, path="/admin/login/")[-1] == LOCKED
    # One count for both doors: the site's own form refuses the account as well.
    assert sign_in(live_site, user, right, address="192.0.2.99").outcome == LOCKED
    assert sign_in(live_site, user, right, address="192.0.2.98", path="/admin/login/").outcome == (
        LOCKED
    )


@pytest.mark.parametrize("cooloff", [3])
def test_the_lock_lifts_after_the_cooloff(live_site: str, cooloff: int) -> None:
    user, right = LOGIN
    address = "198.51.100.77"
    tries = [(user, WRONG, address)] * ACCOUNT_LIMIT
    answers = [sign_in(live_site, *t[:2], address=t[2]) for t in tries]
    last_failure = time.monotonic()
    assert answers[-1].outcome == LOCKED
    assert_lockout_page(answers[-1], wait="3 seconds")
    assert answers[-1].response.headers["retry-after"] == "3"
    right_password = sign_in(live_site, user, right, address=address)
    # A machine slow enough to take the whole cool-off over one sign-in proves nothing here.
    if time.monotonic() - last_failure < cooloff - 0.5:
        assert right_password.outcome == LOCKED
    time.sleep(cooloff + 0.5)
    assert sign_in(live_site, user, right, address=address).outcome == SIGNED_IN
