"""The chat page when its socket's login ends, in a real headless Chromium: a password changed
on the same browser keeps the page, whose login goes on under a renewed cookie; a login that
has really ended sends the page to sign in."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from tests.conftest import LOGIN, run_manage
from tests.llm_server import ScriptedLLM
from tests.test_browser import log_in, needs_chromium, page  # noqa: F401  (the fixture)

pytestmark = [pytest.mark.django_db(transaction=True), needs_chromium]
NEW_PASSWORD = "a-new-pass-456"


def change_password(tab: Any, live_site: str) -> None:
    from playwright.sync_api import expect

    tab.goto(live_site + "/admin/password_change/")
    tab.fill("input[name=old_password]", LOGIN[1])
    tab.fill("input[name=new_password1]", NEW_PASSWORD)
    tab.fill("input[name=new_password2]", NEW_PASSWORD)
    tab.click("input[type=submit]")
    expect(tab).to_have_url(re.compile(r"/admin/password_change/done/$"))


def test_a_password_changed_in_another_tab_keeps_the_chat_open(
    page: Any,  # noqa: F811
    live_site: str,
    llm: ScriptedLLM,
) -> None:
    from playwright.sync_api import expect

    log_in(page, live_site)
    chat = page.url
    expect(page.locator("#composer")).to_be_enabled()

    # The change cycles this browser's login to a new key and ends the key the open socket
    # came in with: the server closes that socket as signed out.
    change_password(page.context.new_page(), live_site)

    time.sleep(3)  # the close, and the page's one more try 1.5 s after it
    assert page.url == chat
    llm.reply("Still here.")
    page.fill("#composer", "are you there?")
    page.press("#composer", "Enter")
    expect(page.locator(".msg.assistant").last).to_contain_text("Still here.")


def test_a_login_ended_elsewhere_sends_the_page_to_sign_in(
    page: Any,  # noqa: F811
    live_site: str,
    site_env: dict[str, str],
) -> None:
    from playwright.sync_api import expect

    log_in(page, live_site)
    expect(page.locator("#composer")).to_be_enabled()

    code = f"from django.contrib.auth.models import User; u = User.objects.get(username={LOGIN[0]!r}); u.set_password('x-y-z-123456'); u.save()"
    done = run_manage(site_env, "shell", "-c", code)
    assert done.returncode == 0, done.stderr

    expect(page).to_have_url(re.compile(r"/accounts/login/"))
