"""A conversation an OpenAI client had through /v1/ opens on the chat page, in a real
headless Chromium against a real daphne: listed with its badge, at /c/openai:<id>/, and
shown live while the client's next turn runs."""

from __future__ import annotations

import re
import threading

import httpx

from tests.conftest import login_token
from tests.llm_server import ScriptedLLM
from tests.test_browser import log_in, page, pytestmark  # noqa: F401  (the fixture, the same marks)


def ask(live_site: str, token: str, content: str) -> str:
    body = {
        "model": "agentsite",
        "user": "webui",
        "messages": [{"role": "user", "content": content}],
    }
    answer = httpx.post(
        f"{live_site}/v1/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return str(answer.json()["choices"][0]["message"]["content"])


def test_an_openai_clients_session_opens_from_the_list(
    page,  # noqa: F811  (the fixture imported above)
    live_site: str,
    site_env: dict[str, str],
    llm: ScriptedLLM,
) -> None:
    from playwright.sync_api import expect

    token = login_token(site_env)
    llm.reply("answered the client")
    assert ask(live_site, token, "from an OpenAI client") == "answered the client"

    log_in(page, live_site)
    item = page.locator("#session-list li[data-key='openai:webui']")
    expect(item).to_contain_text("from an OpenAI client")
    expect(item.locator(".session-badge")).to_have_text("OpenAI")
    item.locator(".session-link").click()
    expect(page).to_have_url(re.compile(r"/c/openai:webui/$"))
    expect(page.locator(".msg.assistant")).to_contain_text("answered the client")

    # The client's next turn shows on the open page as it runs.
    llm.tool_call("list_dir", {"path": "."}, delay=1.0).reply("second answer")
    client = threading.Thread(target=ask, args=(live_site, token, "and again"))
    client.start()
    expect(page.locator(".msg.user").last).to_contain_text("and again")
    expect(page.locator(".msg.assistant").last).to_contain_text("second answer")
    client.join(timeout=30)
