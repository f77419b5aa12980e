"""Team chats in a real headless Chromium: members, each in a browser of their own, on two
daphne processes sharing one database and (when the suite runs on it) one Redis, see the
same reply stream, who wrote each message and who is looking; a member removed from the
team loses the chat at once; a stranger reaches it at no door; the team's agent keeps to
the team's folder and remembers for the team.

With the in-memory channel layer (no `REDIS_URL`) processes share no events: there every
member's browser talks to one daphne, so that what the page does is tested all the same;
run with `REDIS_URL` (and `DATABASE_URL`), the members are spread over two."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent.tools import sandbox
from tests.conftest import ROOT, add_login, free_port, login_token, needs, run_manage, wait_for_port
from tests.llm_server import ScriptedLLM
from tests.test_browser import ARTIFACTS, launch
from tests.test_browser import pytestmark as browser_marks

# The PostgreSQL and Redis pass runs it too: there the members are on two processes.
pytestmark = [*browser_marks, pytest.mark.processes]

# Two processes when their channel layer is shared; one when each would have its own.
PROCESSES = 2 if os.environ.get("REDIS_URL") else 1
PASSWORD = "team-pass-123"
PEOPLE = {
    "ada": ("Ada", "Lovelace"),
    "bob": ("Bob", "Kahn"),
    "cal": ("Cal", "Henderson"),
    "eve": ("Eve", "Ng"),
    "dan": ("Dan", "Roe"),
}
# `ops` (Operations): ada, bob and cal; `sales`: eve alone; dan in no team. Each gets an API
# token. (`{hash}`: PASSWORD, hashed once for the run, as the servers' hasher stores it.)
SETUP = """
import json
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token
from teams_app import services as teams
people = {{
    name: User.objects.create(username=name, password={hash!r}, first_name=first, last_name=last)
    for name, (first, last) in {people!r}.items()
}}
ops = teams.create_team(slug="ops", name="Operations", synced=False)
teams.set_members(team=ops, users=[people[name] for name in ("ada", "bob", "cal")])
sales = teams.create_team(slug="sales", name="Sales", synced=False)
teams.set_members(team=sales, users=[people["eve"]])
print(json.dumps({{name: Token.objects.create(user=user).key for name, user in people.items()}}))
"""
STORY = " ".join(f"word{n}" for n in range(60)) + "."
WITHIN = 1.0
# Records, on a page, the length of the newest reply's text each time it changes.
RECORD_GROWTH = """() => {
  window.replyLengths = [];
  const messages = document.getElementById("messages");
  new MutationObserver(() => {
    const bodies = messages.querySelectorAll(".msg.assistant .msg-body");
    const body = bodies[bodies.length - 1];
    const length = body ? body.textContent.length : 0;
    if (length && length !== window.replyLengths[window.replyLengths.length - 1]) {
      window.replyLengths.push(length);
    }
  }).observe(messages, { subtree: true, childList: true, characterData: true });
}"""
SANDBOX_MISSING = sandbox.unavailable_reason()


@pytest.fixture
def servers(
    site_env: dict[str, str], login_password: str
) -> Iterator[list[tuple[int, subprocess.Popen[bytes]]]]:
    """`PROCESSES` daphne processes serving the site, starting (with `LOGIN`, a superuser,
    who changes the team); their ports."""
    add_login(site_env, login_password)
    ports = [free_port() for _ in range(PROCESSES)]
    command = [sys.executable, "-m", "agentsite.web", "-v", "0", "-b", "127.0.0.1", "-p"]
    started = [
        subprocess.Popen(
            [*command, str(port), "agentsite.asgi:application"], cwd=ROOT, env=site_env
        )
        for port in ports
    ]
    try:
        yield list(zip(ports, started, strict=True))
    finally:
        for server in started:
            server.terminate()
        for server in started:
            server.wait(timeout=10)


@pytest.fixture(scope="session")
def password_hash() -> str:
    from django.contrib.auth.hashers import PBKDF2PasswordHasher

    hasher = PBKDF2PasswordHasher()
    return hasher.encode(PASSWORD, hasher.salt())


@pytest.fixture
def tokens(site_env: dict[str, str], servers: list[Any], password_hash: str) -> dict[str, str]:
    """The people and teams, made in the sites' database while the servers start; each
    person's API token."""
    setup = SETUP.format(hash=password_hash, people=PEOPLE)
    done = run_manage(site_env, "shell", "-c", setup)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def sites(servers: list[Any], tokens: dict[str, str]) -> list[str]:
    """The servers' base URLs, once they answer."""
    for port, server in servers:
        wait_for_port(port, server)
    return [f"http://127.0.0.1:{port}" for port, _ in servers]


@pytest.fixture
def browser() -> Iterator[Any]:
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=20_000)  # CI machines are slower than a laptop
    with sync_playwright() as playwright:
        chromium = launch(playwright)
        yield chromium
        chromium.close()


class Member:
    """A person's browser (a context of their own, so a login of their own) and its page."""

    def __init__(self, browser: Any, base: str, name: str) -> None:
        self.base = base
        self.name = name
        self.context = browser.new_context(viewport={"width": 1200, "height": 800})
        self.page = self.context.new_page()
        self.page.set_default_timeout(20_000)
        self.sockets: list[Any] = []  # every chat socket the page opened
        self.chunks: list[str] = []  # the text of each `stream_chunk` frame its sockets got
        self.page.on("websocket", self._watch)

    def _watch(self, socket: Any) -> None:
        self.sockets.append(socket)

        def received(payload: Any) -> None:
            frame = json.loads(payload)
            if frame.get("type") == "stream_chunk":
                self.chunks.append(frame["content"])

        socket.on("framereceived", received)

    def log_in(self, path: str = "/") -> Any:
        """Sign in, landing on `path`; the response of the page there."""
        from playwright.sync_api import expect

        page = self.page
        page.goto(f"{self.base}/accounts/login/?next={path}")
        page.fill("input[name=username]", self.name)
        page.fill("input[name=password]", PASSWORD)
        with page.expect_navigation() as landed:
            page.click("button[type=submit]")
        if path.startswith("/c/"):
            expect(page.locator("#composer")).to_be_enabled()
        return landed.value

    def open(self, key: str) -> Any:
        """Sign in straight into chat `key`; the page, its socket open (the server names
        its viewers once it has sent the history)."""
        from playwright.sync_api import expect

        self.log_in(f"/c/{key}/")
        expect(self.page.locator("#presence")).to_be_visible()
        return self.page

    def say(self, text: str) -> None:
        self.page.fill("#composer", text)
        self.page.press("#composer", "Enter")

    def close(self) -> None:
        self.context.close()


def start_team_chat(base: str, token: str, team: str = "ops") -> str:
    response = httpx.post(
        f"{base}/api/sessions",
        json={"team": team},
        headers={"Authorization": f"Token {token}"},
        timeout=30,
    )
    assert response.status_code == 201, response.text
    return str(response.json()["key"])


def viewers(page: Any) -> list[str]:
    return [
        str(t)
        for t in page.locator("#presence .presence-badge").evaluate_all("n => n.map(b => b.title)")
    ]


def test_two_members_on_two_processes_stream_one_reply_and_see_who_wrote_what(
    sites: list[str], tokens: dict[str, str], browser: Any, llm: ScriptedLLM
) -> None:
    from playwright.sync_api import expect

    key = start_team_chat(sites[0], tokens["ada"])
    ada = Member(browser, sites[0], "ada")
    bob = Member(browser, sites[-1], "bob")
    for member in (ada, bob):
        member.open(key)
        member.page.evaluate(RECORD_GROWTH)

    llm.reply(STORY, chunks=30, chunk_delay=0.06)
    ada.say("tell the team a story")
    for member in (ada, bob):
        page = member.page
        expect(page.locator(".msg.assistant .msg-body").last).to_have_text(STORY)
        # The reply grew on the page, piece by piece, before it was whole.
        lengths = page.evaluate("window.replyLengths")
        assert len(lengths) >= 5 and lengths == sorted(lengths), (member.name, lengths)
        assert len(member.chunks) >= 10 and "".join(member.chunks) == STORY, member.name
        # Whose message it was, and whose message the reply answers.
        said = page.locator(".msg.user").last
        expect(said.locator(".msg-author .msg-author-name")).to_have_text("Ada Lovelace")
        expect(said.locator(".msg-author .person-badge")).to_have_text("AL")
        expect(said.locator(".msg-body")).to_have_text("tell the team a story")
        expect(page.locator(".msg.assistant .msg-answering").last).to_have_text(
            "answering Ada Lovelace"
        )
        expect(page.locator("#team-chip")).to_have_text("Operations")
        # A team chat is every member's already: nothing to share.
        expect(page.locator("#share-open")).to_be_hidden()

    llm.reply("And now for Bob.")
    bob.say("and one for me")
    expect(ada.page.locator(".msg.user").last.locator(".msg-author-name")).to_have_text("Bob Kahn")
    expect(ada.page.locator(".msg-answering").last).to_have_text("answering Bob Kahn")
    expect(bob.page.locator(".msg.assistant .msg-body").last).to_have_text("And now for Bob.")

    # After a reload the names come from the stored history.
    bob.page.reload()
    expect(bob.page.locator(".msg.user .msg-author-name")).to_have_text(
        ["Ada Lovelace", "Bob Kahn"]
    )
    expect(bob.page.locator(".msg-answering")).to_have_text(
        ["answering Ada Lovelace", "answering Bob Kahn"]
    )
    expect(bob.page.locator(".msg.user.mine .msg-author-name")).to_have_text(["Bob Kahn"])
    # Bob may edit his own message only, and regenerate only the reply to it.
    users = bob.page.locator(".msg.user")
    expect(users.nth(0).locator(".msg-edit")).to_have_css("display", "none")
    expect(users.nth(1).locator(".msg-edit")).not_to_have_css("display", "none")
    regenerate = bob.page.locator(".msg.assistant .msg-regenerate")
    expect(regenerate).to_have_count(2)
    expect(regenerate.nth(0)).to_have_css("display", "none")  # the reply to Ada
    expect(regenerate.nth(1)).not_to_have_css("display", "none")
    # The list shows the chat under its team's name, apart from the person's own chats.
    group = bob.page.locator("#session-list .session-team[data-team=ops]")
    expect(group.locator(".session-team-name")).to_have_text("Operations")
    expect(group.locator(f".session-item[data-key='{key}']")).to_be_visible()
    # Only a team's admins delete its chats.
    expect(group.locator(".session-delete")).to_have_count(0)
    expect(bob.page.locator("#presence .presence-badge")).to_have_count(2)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    bob.page.screenshot(path=str(ARTIFACTS / "team-chat.png"))


def test_the_header_shows_who_is_looking_and_drops_one_who_leaves(
    sites: list[str], tokens: dict[str, str], browser: Any, llm: ScriptedLLM
) -> None:
    from playwright.sync_api import expect

    key = start_team_chat(sites[0], tokens["bob"])
    ada = Member(browser, sites[0], "ada")
    bob = Member(browser, sites[-1], "bob")
    for member in (ada, bob):
        member.open(key)
    # One who comes in the middle of a reply sees whose message it answers all the same.
    llm.reply(STORY, chunks=40, chunk_delay=0.1)
    ada.say("a story, please")
    expect(ada.page.locator(".msg.assistant .msg-body").last).to_contain_text("word5")
    cal = Member(browser, sites[0], "cal")
    cal.open(key)
    expect(cal.page.locator(".msg.assistant .msg-body").last).to_have_text(STORY)
    assert cal.chunks, "cal came after the reply"
    expect(cal.page.locator(".msg-answering")).to_have_text(["answering Ada Lovelace"])
    expect(cal.page.locator(".msg.user .msg-author-name")).to_have_text(["Ada Lovelace"])
    everyone = ["Ada Lovelace (you)", "Bob Kahn", "Cal Henderson"]
    expect(ada.page.locator("#presence .presence-badge")).to_have_count(3)
    assert viewers(ada.page) == everyone
    expect(bob.page.locator("#presence .presence-badge")).to_have_text(["AL", "BK", "CH"])
    assert viewers(bob.page) == ["Ada Lovelace", "Bob Kahn (you)", "Cal Henderson"]

    cal.close()
    for member in (ada, bob):
        expect(member.page.locator("#presence .presence-badge")).to_have_text(["AL", "BK"])
    assert viewers(ada.page) == everyone[:2]
    # A personal chat shows no one.
    bob.page.click("#new-chat")
    expect(bob.page.locator("#presence")).to_be_hidden()
    expect(bob.page.locator("#team-chip")).to_be_hidden()
    expect(ada.page.locator("#presence .presence-badge")).to_have_text(["AL"])


def test_a_member_removed_from_the_team_loses_the_open_chat_within_a_second(
    sites: list[str], tokens: dict[str, str], site_env: dict[str, str], browser: Any
) -> None:
    from playwright.sync_api import expect

    key = start_team_chat(sites[0], tokens["ada"])
    bob = Member(browser, sites[-1], "bob")
    bob.open(key)
    expect(bob.page.locator("#presence .presence-badge")).to_have_count(1)
    opened = len(bob.sockets)

    # A staff member takes bob out of the team, through the other process's API.
    changed = httpx.patch(
        f"{sites[0]}/api/teams/ops",
        json={"members": ["ada", "cal"]},
        headers={"Authorization": f"Token {login_token(site_env)}"},
        timeout=30,
    )
    assert changed.status_code == 200, changed.text
    fatal = bob.page.locator("#fatal")
    expect(fatal).to_have_text(
        "You are no longer a member of the team Operations: this chat is closed to you.",
        timeout=WITHIN * 1000,
    )
    expect(bob.page.locator(".notice")).to_contain_text("no longer a member of this chat's team")
    expect(bob.page.locator("#composer")).to_be_disabled()
    expect(bob.page.locator("#presence")).to_be_hidden()
    expect(bob.page.locator(f"#session-list [data-key='{key}']")).to_have_count(0)
    # Closed for good: the page does not try again.
    time.sleep(1.5)
    assert len(bob.sockets) == opened


def test_a_stranger_reaches_the_team_chat_at_no_door(
    sites: list[str], tokens: dict[str, str], browser: Any, llm: ScriptedLLM
) -> None:
    key = start_team_chat(sites[0], tokens["ada"])
    base = sites[-1]
    eve = Member(browser, base, "eve")
    eve.log_in("/")
    page = eve.page
    assert eve.page.goto(f"{base}/c/{key}/").status == 404
    code = page.evaluate(
        """(url) => new Promise((resolve) => {
             const socket = new WebSocket(url);
             socket.onclose = (event) => resolve(event.code);
           })""",
        base.replace("http", "ws") + f"/ws/chat/{key}/",
    )
    assert code == 4404
    assert page.request.get(f"{base}/api/sessions/{key}").status == 404
    door = httpx.post(
        f"{base}/v1/chat/completions",
        json={"model": "openai/scripted", "messages": [{"role": "user", "content": "hi"}]},
        headers={"Authorization": f"Bearer {tokens['eve']}", "X-Session-Key": key},
        timeout=30,
    )
    assert door.status_code == 404, door.text
    assert llm.requests == []

    # Her own team's chats are hers to start; another team's are not offered.
    from playwright.sync_api import expect

    page.goto(f"{base}/")
    page.click("#new-team-chat")
    expect(page.locator("#team-menu .team-menu-item")).to_have_text(["Sales"])
    # One in no team is offered none.
    dan = Member(browser, base, "dan")
    with dan.page.expect_response(lambda response: response.url.endswith("/api/me")):
        dan.log_in("/")
    expect(dan.page.locator("#new-team-chat")).to_be_hidden()


@needs(SANDBOX_MISSING is not None, f"exec needs its sandbox: {SANDBOX_MISSING}")
def test_the_teams_agent_shares_files_among_members_and_keeps_out_of_their_own(
    sites: list[str], tokens: dict[str, str], browser: Any, llm: ScriptedLLM, workspace: Path
) -> None:
    from playwright.sync_api import expect

    own = workspace / "users" / "ada"
    own.mkdir(parents=True)
    (own / "notes.txt").write_text("ada's private notes")
    key = start_team_chat(sites[0], tokens["ada"])
    ada = Member(browser, sites[0], "ada")
    ada.open(key)
    llm.tool_call("write_file", {"path": "runbook.md", "content": "restart the pump"})
    llm.reply("Written.")
    ada.say("note the runbook")
    expect(ada.page.locator(".msg.assistant .msg-body").last).to_have_text("Written.")

    bob = Member(browser, sites[-1], "bob")
    bob.open(key)
    llm.tool_call("read_file", {"path": "runbook.md"})
    llm.tool_call("exec", {"command": "cat ../../users/ada/notes.txt"})
    llm.tool_call("exec", {"command": f"cat {own / 'notes.txt'}"})
    llm.reply("The runbook says to restart the pump; Ada's notes are not here.")
    bob.say("what does the runbook say, and what is in Ada's notes?")
    expect(bob.page.locator(".msg.assistant .msg-body").last).to_contain_text("restart the pump")
    # The last request carries the whole conversation: ada's turn's result, then bob's.
    results = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"][-3:]
    assert "restart the pump" in results[0]
    for result in results[1:]:
        assert "private" not in result and "No such file" in result, result
    assert (workspace / "teams" / "ops" / "runbook.md").read_text() == "restart the pump"


def test_team_memory_carries_a_fact_to_the_teams_next_chat_and_not_to_a_members_own(
    sites: list[str], tokens: dict[str, str], browser: Any, llm: ScriptedLLM
) -> None:
    from playwright.sync_api import expect

    ada = Member(browser, sites[0], "ada")
    ada.log_in("/")
    page = ada.page
    # A team chat, started from the list.
    page.click("#new-team-chat")
    page.click("#team-menu .team-menu-item[data-team=ops]")
    expect(page).to_have_url(re.compile(r"/c/team:[A-Za-z0-9_.@-]+/$"))
    expect(page.locator("#team-chip")).to_have_text("Operations")
    llm.reply("Noted.")
    ada.say("the pump is P-7")
    expect(page.locator(".msg.assistant .msg-body").last).to_have_text("Noted.")
    fact = "The team's pump is P-7."
    llm.tool_call("save_memory", {"history_entry": "Ada named the pump.", "memory_update": fact})
    ada.say("/new")
    expect(page.locator(".msg.assistant .msg-body").last).to_contain_text("messages archived")

    bob = Member(browser, sites[-1], "bob")
    bob.log_in("/")
    bob.page.click("#new-team-chat")
    bob.page.click("#team-menu .team-menu-item[data-team=ops]")
    expect(bob.page.locator("#team-chip")).to_have_text("Operations")
    assert bob.page.url != page.url
    llm.reply("P-7.")
    bob.say("which pump?")
    expect(bob.page.locator(".msg.assistant .msg-body").last).to_have_text("P-7.")
    assert fact in llm.requests[-1]["messages"][0]["content"]

    # A member's own chat keeps to their own memory.
    bob.page.click("#new-chat")
    llm.reply("Which pump?")
    bob.say("which pump?")
    expect(bob.page.locator(".msg.assistant .msg-body").last).to_have_text("Which pump?")
    assert fact not in llm.requests[-1]["messages"][0]["content"]
