"""Every page of the admin renders in Chromium under the site's Content-Security-Policy with
nothing refused: each model's list, its add form and the change form of an object of it, a
run's timeline, the usage report and each user's prompt files page. The policy allows no
inline style or script, so a page that carried one would show it broken."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urljoin

import httpx
import pytest

from agent.tools.guards.folders import user_folder
from tests.conftest import LOGIN, login_token
from tests.llm_server import ScriptedLLM
from tests.test_browser import launch
from tests.test_csp import RECORD_VIOLATIONS, browser_only, log_in, violations

pytestmark = [pytest.mark.django_db(transaction=True), browser_only]

# Page-side: resolves once every violation the page's parsing caused has been reported.
SETTLE = "() => new Promise((resolve) => setTimeout(resolve, 150))"


@pytest.fixture
def page(live_site: str) -> Iterator[object]:
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=20_000)
    with sync_playwright() as playwright:
        browser = launch(playwright)
        context = browser.new_context(viewport={"width": 1200, "height": 800})
        context.add_init_script(RECORD_VIOLATIONS)
        page = context.new_page()
        page.set_default_timeout(20_000)
        yield page
        browser.close()


def fill_the_site(live_site: str, site_env: dict[str, str], llm: ScriptedLLM) -> None:
    """One object of each kind, made as a user makes them: through the API."""
    token = login_token(site_env)
    headers = {"Authorization": f"Token {token}"}
    with httpx.Client(base_url=live_site, headers=headers, timeout=60) as api:
        llm.tool_call("list_dir", {"path": "."})
        llm.reply("A run with a tool call, for its timeline.")
        made = [
            api.post("/api/tasks", json={"prompt": "look around", "session": "api:csp"}),
            api.post(
                "/api/cron-jobs",
                json={
                    "name": "daily",
                    "message": "Hi",
                    "session": "api:csp",
                    "kind": "every",
                    "every_seconds": 3600,
                },
            ),
            api.post("/api/memory", json={"content": "Ada likes trains."}),
            api.post("/api/skills", json={"name": "weather", "description": "d", "content": "c"}),
            api.post(
                "/api/mcp-servers",
                json={"name": "files", "transport": "stdio", "command": "true", "enabled": False},
            ),
        ]
        for response in made:
            assert response.status_code in (200, 201), response.text


def admin_pages(page: object, live_site: str) -> list[str]:
    """The admin's pages: each model's list and add form, from the index."""
    page.goto(live_site + "/admin/")  # type: ignore[attr-defined]
    hrefs = page.eval_on_selector_all(  # type: ignore[attr-defined]
        "#content-main a[href^='/admin/']", "(links) => links.map((a) => a.getAttribute('href'))"
    )
    return sorted(set(hrefs))


def test_every_admin_page_renders_with_nothing_refused(
    page: object,
    live_site: str,
    site_env: dict[str, str],
    llm: ScriptedLLM,
    workspace: Path,
) -> None:
    from playwright.sync_api import expect

    fill_the_site(live_site, site_env, llm)
    own = user_folder(workspace, LOGIN[0])
    (own / "AGENTS.md").write_text("# Mine\n\nA long line " + "word " * 400)
    (own / "skills" / "notes").mkdir(parents=True)
    (own / "skills" / "notes" / "SKILL.md").write_text("---\nname: notes\n---\nTake notes.\n")

    log_in(page, live_site)
    refused: dict[str, list[dict[str, str]]] = {}

    def visit(url: str, *, may_be_forbidden: bool = False) -> None:
        response = page.goto(urljoin(live_site, url))  # type: ignore[attr-defined]
        assert response is not None, url
        if may_be_forbidden and response.status == 403:
            return  # a page the admin offers no one (adding a run, deleting a message...)
        assert response.status == 200, url
        page.evaluate(SETTLE)  # type: ignore[attr-defined]
        found = violations(page)
        if found:
            refused[url] = found

    lists = [href for href in admin_pages(page, live_site) if href.count("/") == 4]
    assert len(lists) >= 10, lists
    for url in lists:
        visit(url)
        first = page.locator("#result_list tbody tr th a").first  # type: ignore[attr-defined]
        change = first.get_attribute("href") if first.count() else None
        if url.endswith("/sessions_app/run/"):
            assert change is not None, "no run to show the timeline of"
        if change is not None:
            visit(change)
            visit(change + "history/")
            visit(change + "delete/", may_be_forbidden=True)
        visit(url + "add/", may_be_forbidden=True)

    # A run's timeline, and a user's prompt files with their text.
    page.goto(live_site + "/admin/sessions_app/run/")  # type: ignore[attr-defined]
    page.locator("#result_list tbody tr th a").first.click()  # type: ignore[attr-defined]
    expect(page.locator(".run-timeline")).to_be_visible()  # type: ignore[attr-defined]
    page.goto(live_site + "/admin/auth/user/")  # type: ignore[attr-defined]
    prompt_files = page.get_by_role("link", name="prompt files").first  # type: ignore[attr-defined]
    href = prompt_files.get_attribute("href")
    assert href is not None and re.search(r"/admin/auth/user/\d+/prompt-files/$", href)
    visit(href.replace("/prompt-files/", "/password/"))
    visit(href)
    expect(page.locator("#prompt-files pre").first).to_contain_text("A long line")  # type: ignore[attr-defined]
    assert refused == {}
    # The stylesheet keeps a long file's text to a box that scrolls.
    box = page.locator("#prompt-files pre").first  # type: ignore[attr-defined]
    assert box.evaluate("(pre) => getComputedStyle(pre).overflowY") == "auto"
    assert box.evaluate("(pre) => getComputedStyle(pre).whiteSpace") == "pre-wrap"
