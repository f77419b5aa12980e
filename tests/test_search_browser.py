"""Searching the chats from the sidebar in a real headless Chromium, against a real daphne:
the results name the chat and the matching words, and one opens its chat at that message,
older than the page the chat opens with, scrolled to and highlighted."""

from __future__ import annotations

import re
from typing import Any

from tests.conftest import LOGIN, python
from tests.llm_server import ScriptedLLM
from tests.test_browser import ARTIFACTS, log_in, page  # noqa: F401  (the `page` fixture)
from tests.test_browser import pytestmark as browser_marks

pytestmark = browser_marks

# A chat of 600 messages, written straight to the site's database (the test's own is another
# one on SQLite); it prints the id of the one message that mentions a narwhal.
SEED = f"""
import os
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
import django
django.setup()
from django.contrib.auth.models import User
from sessions_app.models import Message, Session

owner = User.objects.get(username={LOGIN[0]!r})
session = Session.objects.create(
    key="web:longchat", channel="web", chat_id="longchat", owner=owner, title="A long chat"
)
Message.objects.bulk_create(
    Message(
        session=session,
        role="user" if n % 2 == 0 else "assistant",
        content="Here is the hidden narwhal fact." if n == 20 else f"filler message {{n}}",
    )
    for n in range(600)
)
print(Message.objects.get(session=session, content__contains="narwhal").pk)
"""


def ask(tab: Any, text: str) -> None:
    from playwright.sync_api import expect

    tab.fill("#composer", text)
    tab.press("#composer", "Enter")
    expect(tab.locator(".msg.user").last).to_have_text(text)
    expect(tab.locator("#send[data-state=send]")).to_be_visible()


def test_search_finds_a_message_and_opens_its_chat_at_it(
    page: Any,  # noqa: F811
    live_site: str,
    site_env: dict[str, str],
    llm: ScriptedLLM,
) -> None:
    from playwright.sync_api import expect

    log_in(page, live_site)
    llm.reply("Capybaras are the largest rodents.")
    ask(page, "tell me about capybaras")
    expect(page.locator(".msg.assistant").last).to_contain_text("largest rodents")
    here = page.url
    seeded = python(SEED, site_env)
    assert seeded.returncode == 0, seeded.stderr
    narwhal = int(seeded.stdout.strip())

    # Words typed in the box: the results take the place of the chat list.
    page.fill("#search", "capybara")
    results = page.locator("#search-list .search-link")
    # The chat by its title, then the message and the reply.
    expect(results).to_have_count(3)
    expect(results.first.locator(".search-who")).to_have_text("Title: ")
    expect(page.locator("#session-nav")).to_be_hidden()
    expect(results.first.locator("mark").first).to_have_text(re.compile("capybara", re.I))
    expect(page.locator("#search-list")).to_contain_text("tell me about capybaras")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "search.png"))
    page.press("#search", "Escape")
    expect(page.locator("#session-nav")).to_be_visible()
    expect(page.locator("#search-results")).to_be_hidden()

    # A message far back in another chat: beyond the page the chat opens with.
    page.fill("#search", "narwhal")
    expect(results).to_have_count(1)
    expect(results.first.locator(".search-title")).to_have_text("A long chat")
    expect(results.first.locator(".search-snippet mark")).to_have_text("narwhal")
    results.first.click()
    expect(page).to_have_url(re.compile(rf"/c/longchat/#message-{narwhal}$"))
    found = page.locator(".msg[data-found]")
    expect(found).to_have_count(1)
    expect(found).to_have_attribute("data-id", str(narwhal))
    expect(found).to_have_text("Here is the hidden narwhal fact.")
    expect(found).to_be_in_viewport()
    page.screenshot(path=str(ARTIFACTS / "search-found.png"))
    # Loaded back to a few messages before it (the chat opened with its latest 200); the
    # rest on request.
    expect(page.locator("#earlier")).to_be_visible()
    expect(page.locator("#messages .msg")).to_have_count(600 - 10)
    page.click("#earlier")
    expect(page.locator("#messages .msg")).to_have_count(600)
    expect(page.locator("#earlier")).to_be_hidden()
    expect(found).to_be_visible()

    # A link to the message opens the chat at it too.
    page.goto(here)
    expect(page.locator(".msg.assistant").last).to_contain_text("largest rodents")
    page.goto(f"{live_site}/c/longchat/#message-{narwhal}")
    expect(page.locator(".msg[data-found]")).to_have_text("Here is the hidden narwhal fact.")
    expect(page.locator(".msg[data-found]")).to_be_in_viewport()

    # Back in the first chat, a result there scrolls to the message in place.
    page.goto(here)
    page.fill("#search", "rodents")
    expect(results).to_have_count(1)
    results.first.click()
    expect(page.locator(".msg.assistant[data-found]")).to_contain_text("largest rodents")
    assert page.url.startswith(here)

    # Nothing of another user's, and a query of no words asks nothing.
    page.fill("#search", "?!")
    expect(page.locator("#search-results")).to_be_hidden()
    page.fill("#search", "zebra")
    expect(page.locator("#search-empty")).to_have_text("No chats match.")
    expect(results).to_have_count(0)
