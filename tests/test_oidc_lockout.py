"""A person deactivated here is locked out at every door within a second: signed in through
the identity provider (a login session of the page) with an API token besides, their chat
sockets open (one by the login, one by the token), they are deactivated in the admin as an
administrator does it; then the sockets are closed, the page sends them to sign in and the
token gets 401, all within a second of the admin's save.

The site on daphne and the provider (node's oidc-provider) on loopback, as in
test_oidc_browser.py; the browser's part is played by HTTP clients."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest

from tests.conftest import LOGIN, free_port, run_manage
from tests.oidc_provider import (
    ADA,
    ADA_PASSWORD,
    CLIENT_ID,
    CLIENT_SECRET,
    NodeProvider,
    ensure_installed,
    through_provider,
)
from tests.test_socket_revocation_live import (
    CLOSE_UNAUTHENTICATED,
    INACTIVE,
    SiteRecords,
    chat,
    signed_in,
    until_closed,
)

pytestmark = pytest.mark.django_db(transaction=True)
WITHIN = 1.0


@pytest.fixture(autouse=True)
def provider_port(site_env: dict[str, str]) -> int:
    ensure_installed()
    port = free_port()
    site_env.update(
        {
            "AGENT_OIDC_ISSUER": f"http://127.0.0.1:{port}",
            "AGENT_OIDC_CLIENT_ID": CLIENT_ID,
            "AGENT_OIDC_CLIENT_SECRET": CLIENT_SECRET,
        }
    )
    return port


@pytest.fixture
def provider(live_site: str, provider_port: int, tmp_path: Path) -> Iterator[NodeProvider]:
    folder = tmp_path / "provider"
    folder.mkdir()
    running = NodeProvider(
        folder, live_site + "/oidc/callback/", {"ada": dict(ADA)}, port=provider_port
    ).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def ada_login(live_site: str, provider: NodeProvider) -> str:
    """Ada's login session, from a sign-in at the provider: its cookie."""
    with httpx.Client(base_url=live_site, timeout=20) as browser:
        start = browser.get("/oidc/authenticate/")
        assert start.status_code == 302, start.text[:500]
        back = through_provider(
            start.headers["location"], "ada", ADA_PASSWORD, back_to=live_site, browser=browser
        )
        landed = browser.get(back)
        assert landed.status_code == 302 and landed.headers["location"] == "/", landed.text[:500]
        return str(browser.cookies["sessionid"])


def ada_token(site_env: dict[str, str]) -> str:
    """An API token of Ada's (rest_framework.authtoken), made in the site's database."""
    code = (
        "from django.contrib.auth.models import User; "
        "from rest_framework.authtoken.models import Token; "
        "print(Token.objects.create(user=User.objects.get(username='ada')).key)"
    )
    done = run_manage(site_env, "shell", "-c", code)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()[-1]  # after what the shell says of its imports


class FormFields(HTMLParser):
    """What a browser would post of the page's form: its fields as they are filled in."""

    def __init__(self) -> None:
        super().__init__()
        self.fields: list[tuple[str, str]] = []
        self._select: str | None = None
        self._textarea: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {key: value or "" for key, value in attrs}
        name = found.get("name")
        if tag == "input" and name:
            kind = found.get("type", "text")
            if kind in ("submit", "button", "file", "image"):
                return
            if kind in ("checkbox", "radio") and "checked" not in found:
                return
            self.fields.append((name, found.get("value", "on" if kind == "checkbox" else "")))
        elif tag == "select" and name:
            self._select = name
        elif tag == "option" and self._select and "selected" in found:
            self.fields.append((self._select, found.get("value", "")))
        elif tag == "textarea" and name:
            self._textarea = name
            self.fields.append((name, ""))

    def handle_data(self, data: str) -> None:
        if self._textarea and self.fields and self.fields[-1][0] == self._textarea:
            self.fields[-1] = (self._textarea, self.fields[-1][1] + data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None


async def test_a_person_deactivated_in_the_admin_is_locked_out_at_every_door_within_a_second(
    live_site: str, site_env: dict[str, str], ada_login: str
) -> None:
    token = ada_token(site_env)
    (ada_id,) = SiteRecords(site_env).rows("SELECT id FROM auth_user WHERE username = 'ada'")[0]
    page = f"/admin/auth/user/{ada_id}/change/"
    async with (
        httpx.AsyncClient(base_url=live_site, cookies={"sessionid": ada_login}) as browser,
        httpx.AsyncClient(base_url=live_site, headers={"Authorization": f"Token {token}"}) as api,
        signed_in(live_site, *LOGIN, path="/admin/login/") as admin,
        chat(live_site, "/ws/chat/by-login/", cookie=ada_login) as by_login,
        chat(live_site, f"/ws/chat/by-token/?token={token}") as by_token,
    ):
        assert (await browser.get("/")).status_code == 200
        assert (await api.get("/api/sessions")).status_code == 200
        form = await admin.get(page)
        assert form.status_code == 200
        fields = FormFields()
        fields.feed(form.text)
        assert ("is_active", "on") in fields.fields
        posted: dict[str, list[str]] = {"_save": ["Save"]}
        for name, value in fields.fields:
            if name != "is_active":  # "Active" unticked
                posted.setdefault(name, []).append(value)

        saved = await admin.post(page, data=posted)
        assert saved.status_code == 302, saved.text[:2000]
        changed = time.monotonic()

        door = await browser.get("/")
        assert door.status_code == 302 and door.headers["location"].startswith("/accounts/login/")
        assert (await api.get("/api/sessions")).status_code == 401
        closed = await asyncio.gather(
            until_closed(by_login, since=changed, within=WITHIN),
            until_closed(by_token, since=changed, within=WITHIN),
        )
        took = time.monotonic() - changed
    for frames, code in closed:
        assert code == CLOSE_UNAUTHENTICATED
        assert frames == [{"type": "error", "message": INACTIVE}]
    assert took < WITHIN, f"every door was shut {took:.2f} s after the save"
    (active,) = SiteRecords(site_env).rows("SELECT is_active FROM auth_user WHERE id = ?", ada_id)[
        0
    ]
    assert active in (False, 0)
