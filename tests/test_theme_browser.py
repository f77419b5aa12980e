"""The light/dark theme and the site's icon in a real headless Chromium against daphne: the
toggle's choice is kept (localStorage) and applied before the page paints, in every tab and
in the admin; with no choice the system's scheme rules. `/favicon.ico` answers, and the
admin's pages link the icon."""

from __future__ import annotations

from typing import Any
from urllib.parse import urljoin

from tests.test_browser import launch, log_in
from tests.test_browser import pytestmark as browser_marks

pytestmark = browser_marks

DARK_BG = "rgb(17, 19, 24)"
LIGHT_BG = "rgb(255, 255, 255)"

# The theme the page had when its <body> was first parsed, before any deferred script ran:
# a theme set any later would first paint the wrong colours.
RECORD_EARLY_THEME = """
new MutationObserver((records, observer) => {
  if (!document.body) return;
  observer.disconnect();
  window.themeAtBody = document.documentElement.dataset.theme || "";
}).observe(document, {childList: true, subtree: true});
"""


def theme(tab: Any) -> str:
    return str(tab.evaluate("document.documentElement.dataset.theme || ''"))


def background(tab: Any) -> str:
    return str(tab.evaluate("getComputedStyle(document.body).backgroundColor"))


def test_the_theme_toggle_is_remembered_and_applied_before_the_page_paints(
    live_site: str,
) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        context = launch(playwright).new_context(
            viewport={"width": 1200, "height": 800}, color_scheme="dark"
        )
        context.add_init_script(RECORD_EARLY_THEME)
        page = context.new_page()
        page.set_default_timeout(20_000)
        log_in(page, live_site)
        # No choice made: the system's dark scheme.
        assert page.evaluate("window.themeAtBody") == "dark"
        assert background(page) == DARK_BG
        toggle = page.locator("#theme-toggle")
        expect(toggle).to_have_attribute("aria-pressed", "true")

        other = context.new_page()
        other.goto(page.url)
        expect(other.locator("#theme-toggle")).to_be_visible()

        toggle.click()
        assert theme(page) == "light" and background(page) == LIGHT_BG
        expect(toggle).to_have_attribute("aria-pressed", "false")
        assert page.evaluate("localStorage.getItem('theme')") == "light"
        # Code is highlighted in the theme's colours, not the system's.
        sheets = page.evaluate(
            "Array.from(document.querySelectorAll('link[data-theme-for]'),"
            " (link) => [link.dataset.themeFor, matchMedia(link.media).matches])"
        )
        assert sorted(sheets) == [["dark", False], ["light", True]]
        # The other tab follows.
        expect(other.locator("html")).to_have_attribute("data-theme", "light")

        page.reload()
        expect(page.locator("#composer")).to_be_visible()
        assert page.evaluate("window.themeAtBody") == "light"
        assert background(page) == LIGHT_BG

        # The admin keeps its own toggle under the same key: it shows the same choice.
        page.goto(live_site + "/admin/")
        expect(page.locator("html")).to_have_attribute("data-theme", "light")

        # Without a choice the page follows the system, as it changes.
        page.goto(live_site + "/")
        page.evaluate("localStorage.removeItem('theme')")
        page.emulate_media(color_scheme="light")
        page.reload()
        assert page.evaluate("window.themeAtBody") == "light"
        page.emulate_media(color_scheme="dark")
        expect(page.locator("html")).to_have_attribute("data-theme", "dark")
        assert background(page) == DARK_BG


def test_the_site_icon_and_a_single_model(live_site: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        page = launch(playwright).new_context().new_page()
        page.set_default_timeout(20_000)
        log_in(page, live_site)
        # One model configured: its name, no picker.
        expect(page.locator("#model-name")).to_be_visible()
        expect(page.locator("#model-picker")).to_be_hidden()

        icon = page.request.get(live_site + "/favicon.ico")
        assert icon.ok, icon.status
        assert icon.url.endswith("/static/chat/favicon.svg")
        assert icon.headers["content-type"].startswith("image/svg+xml")
        assert icon.body().startswith(b"<svg")

        for path in ("/", "/admin/", "/admin/sessions_app/run/", "/admin/login/"):
            page.goto(live_site + path)
            href = page.locator("link[rel=icon]").get_attribute("href")
            assert href, path
            linked = page.request.get(urljoin(page.url, href))
            assert linked.ok and linked.headers["content-type"].startswith("image/svg+xml"), path
