"""Access that ends closes the sockets it opened, across processes: two daphne processes on
one database (and one Redis, when the suite runs on it), and the change made in a third
process (a `manage.py shell`) or in the other daphne (the admin, the logout page). Each
socket is closed within a second of the change; a message sent as it closes runs nothing;
a deactivated user's running turn stops and their waiting approval ends.

Without Redis nothing the channel layer carries gets from one process to another: there the
web process's poll of its sockets' credentials closes them."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.db import connection

from tests.conftest import (
    LOGIN,
    ROOT,
    add_login,
    folder_of,
    free_port,
    login_token,
    off_the_loop,
    run_manage,
    wait_for_port,
)
from tests.llm_server import ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)

WITHIN = 1.0
CLOSE_UNAUTHENTICATED = 4401
CLOSE_DELETED = 4410
INACTIVE = "your account has been deactivated: this chat is closed"
TOKEN_GONE = (
    "the token this chat was opened with has been deleted: open it again with a valid token"
)
SIGNED_OUT = "you have been signed out, or your password was changed: sign in again"
ADMIN = ("root", "root-pass-123")

USER = (
    f"from django.contrib.auth.models import User; user = User.objects.get(username={LOGIN[0]!r})"
)
DEACTIVATE = f"{USER}; user.is_active = False; user.save()"
CHANGE_PASSWORD = f"{USER}; user.set_password('another-pass-456'); user.save()"
DELETE_USER = f"{USER}; user.delete()"
DELETE_TOKEN = f"{USER}; from rest_framework.authtoken.models import Token; " + (
    "Token.objects.filter(user=user).delete()"
)


@pytest.fixture
def env(site_env: dict[str, str], login_password: str) -> dict[str, str]:
    """The sites' environment, with the login `LOGIN` made; `write_file` waits for a person."""
    add_login(site_env, login_password)
    return {**site_env, "AGENT_APPROVE_TOOLS": "write_file"}


@pytest.fixture
def sites(env: dict[str, str]) -> Iterator[list[str]]:
    """Two daphne processes serving the site; their base URLs."""
    ports = [free_port(), free_port()]
    command = [sys.executable, "-m", "agentsite.web", "-v", "0", "-b", "127.0.0.1", "-p"]
    servers = [
        subprocess.Popen([*command, str(port), "agentsite.asgi:application"], cwd=ROOT, env=env)
        for port in ports
    ]
    try:
        for port, server in zip(ports, servers, strict=True):
            wait_for_port(port, server)
        yield [f"http://127.0.0.1:{port}" for port in ports]
    finally:
        for server in servers:
            server.terminate()
        for server in servers:
            server.wait(timeout=10)


async def shell(env: dict[str, str], code: str) -> float:
    """Run `code` in `manage.py shell`, a process of its own; when it had finished."""
    done = await asyncio.to_thread(run_manage, env, "shell", "-c", code)
    assert done.returncode == 0, done.stderr
    return time.monotonic()


@asynccontextmanager
async def chat(base: str, path: str, *, cookie: str | None = None) -> AsyncIterator[Any]:
    """A socket open on `base` at `path`, its history frame read."""
    import websockets

    headers = {"Cookie": f"sessionid={cookie}"} if cookie else None
    url = base.replace("http", "ws") + path
    async with websockets.connect(url, origin=base, additional_headers=headers) as socket:
        assert json.loads(await socket.recv())["type"] == "history"
        yield socket


async def until_closed(socket: Any, *, since: float, within: float = WITHIN) -> tuple[list, int]:
    """The frames `socket` gets until it is closed, and the close code; closed `within`
    seconds of `since` at the latest."""
    import websockets

    frames = []
    try:
        async with asyncio.timeout(since + within - time.monotonic()):
            while True:
                frames.append(json.loads(await socket.recv()))
    except websockets.ConnectionClosed:
        pass
    except TimeoutError:
        raise AssertionError(f"still open {within} s after the change: {frames}") from None
    return frames, socket.close_code


async def answers_help(socket: Any) -> None:
    """The socket is open and answers."""
    await socket.send(json.dumps({"type": "message", "content": "/help"}))
    while True:
        frame = json.loads(await asyncio.wait_for(socket.recv(), 10))
        if frame["type"] == "message" and frame["role"] == "assistant":
            assert frame["content"].startswith("Commands")
            return


@asynccontextmanager
async def signed_in(
    base: str, username: str, password: str, path: str = "/accounts/login/"
) -> AsyncIterator[httpx.AsyncClient]:
    """A browser signed in at `base` (a login session of its own)."""
    async with httpx.AsyncClient(base_url=base, timeout=30) as browser:
        await browser.get(path)
        response = await browser.post(
            path,
            data={
                "csrfmiddlewaretoken": browser.cookies["csrftoken"],
                "username": username,
                "password": password,
            },
        )
        assert response.status_code == 302, response.text[:500]
        yield browser


class SiteRecords:
    """The sites' database, as another process sees it: the test database on PostgreSQL,
    the sites' own SQLite file otherwise."""

    def __init__(self, env: dict[str, str]) -> None:
        self.sqlite = None if "DATABASE_URL" in env else Path(env["AGENT_DATA_DIR"])

    def rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        if self.sqlite is None:

            def read() -> list[tuple[Any, ...]]:
                with connection.cursor() as cursor:
                    cursor.execute(sql.replace("?", "%s"), params)
                    return list(cursor.fetchall())

            return off_the_loop(read)
        with sqlite3.connect(self.sqlite / "db.sqlite3", timeout=20) as db:
            return db.execute(sql, params).fetchall()

    def statuses(self) -> dict[str, str]:
        """Each session's run's status, by session key."""
        found = self.rows(
            "SELECT s.key, r.status FROM sessions_app_run r"
            " JOIN sessions_app_session s ON s.id = r.session_id"
        )
        return dict(found)

    def approvals(self) -> list[str]:
        return [status for (status,) in self.rows("SELECT status FROM sessions_app_approval")]


# ---- deactivated ---------------------------------------------------------------------------


async def test_deactivating_the_user_in_a_shell_closes_their_socket_and_runs_nothing_more(
    sites: list[str], env: dict[str, str], llm: ScriptedLLM, workspace: Path
) -> None:
    token = login_token(env)
    marker = folder_of(workspace, LOGIN[0]) / "marker"
    llm.tool_call("exec", {"command": "touch marker"}).reply("touched")
    async with chat(sites[1], f"/ws/chat/deact/?token={token}") as socket:
        changed = await shell(env, DEACTIVATE)
        import websockets

        # Sent as the socket closes: it arrives before the close or finds it closed.
        with suppress(websockets.ConnectionClosed):
            await socket.send(json.dumps({"type": "message", "content": "touch the marker"}))
        frames, code = await until_closed(socket, since=changed)
    assert code == CLOSE_UNAUTHENTICATED
    assert frames == [{"type": "error", "message": INACTIVE}]
    await asyncio.sleep(0.5)
    assert llm.requests == [] and not marker.exists()


def user_form() -> dict[str, str]:
    """The admin's change form of `LOGIN`'s user as a browser posts it, "active" unticked."""
    now = time.gmtime()
    return {
        "username": LOGIN[0],
        "first_name": "",
        "last_name": "",
        "email": "",
        "is_staff": "on",
        "is_superuser": "on",
        "last_login_0": "",
        "last_login_1": "",
        "date_joined_0": time.strftime("%Y-%m-%d", now),
        "date_joined_1": time.strftime("%H:%M:%S", now),
        "agent_budget-TOTAL_FORMS": "0",
        "agent_budget-INITIAL_FORMS": "0",
        "agent_budget-MIN_NUM_FORMS": "0",
        "agent_budget-MAX_NUM_FORMS": "1",
        "_save": "Save",
    }


async def test_deactivating_the_user_in_the_admin_of_one_process_closes_their_socket_on_the_other(
    sites: list[str], env: dict[str, str], llm: ScriptedLLM
) -> None:
    token = login_token(env)
    await shell(
        env,
        "from django.contrib.auth.models import User; "
        f"User.objects.create_superuser({ADMIN[0]!r}, '', {ADMIN[1]!r})",
    )
    (user_id,) = SiteRecords(env).rows("SELECT id FROM auth_user WHERE username = ?", LOGIN[0])[0]
    async with (
        signed_in(sites[0], *ADMIN, path="/admin/login/") as admin,
        chat(sites[1], f"/ws/chat/by-admin/?token={token}") as socket,
    ):
        page = f"/admin/auth/user/{user_id}/change/"
        form = await admin.get(page)
        assert form.status_code == 200
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
        assert csrf is not None
        saved = await admin.post(page, data={**user_form(), "csrfmiddlewaretoken": csrf[1]})
        assert saved.status_code == 302, saved.text[:2000]
        changed = time.monotonic()
        frames, code = await until_closed(socket, since=changed)
    assert code == CLOSE_UNAUTHENTICATED
    assert frames == [{"type": "error", "message": INACTIVE}]
    assert SiteRecords(env).rows("SELECT is_active FROM auth_user WHERE id = ?", user_id)[0][0] in (
        False,
        0,
    )


async def test_deactivating_the_user_stops_their_running_turn_and_ends_their_waiting_approval(
    sites: list[str], env: dict[str, str], llm: ScriptedLLM
) -> None:
    token = login_token(env)
    records = SiteRecords(env)
    llm.tool_call("exec", {"command": "sleep 30"})
    async with httpx.AsyncClient(
        base_url=sites[0], headers={"Authorization": f"Token {token}"}, timeout=60
    ) as api:
        # A task of the API's, run by the first process; no socket has anything to do with it.
        task = asyncio.create_task(api.post("/api/tasks", json={"prompt": "sleep", "wait": True}))
        deadline = time.monotonic() + 20
        while not llm.requests:
            assert time.monotonic() < deadline and not task.done(), "the task never started"
            await asyncio.sleep(0.05)
        llm.tool_call("write_file", {"path": "f.txt", "content": "F"})
        async with chat(sites[1], f"/ws/chat/ask/?token={token}") as socket:
            await socket.send(json.dumps({"type": "message", "content": "write f.txt"}))
            while (
                json.loads(await asyncio.wait_for(socket.recv(), 20))["type"] != "thinking_finished"
            ):
                pass
        # The tab is closed: what waits is the user's, not a socket's.
        await shell(env, DEACTIVATE)
        answered = await asyncio.wait_for(task, 10)
    assert answered.status_code == 200, answered.text
    assert answered.json()["status"] == "cancelled"
    statuses = records.statuses()
    assert statuses.pop("web:ask") == "cancelled"
    assert list(statuses.values()) == ["cancelled"]
    assert records.approvals() == ["cancelled"]
    assert len(llm.requests) == 2  # neither turn called the model again


# ---- a token, a login, a password, an account -----------------------------------------------


async def test_deleting_the_token_closes_the_socket_it_opened_and_no_other(
    sites: list[str], env: dict[str, str]
) -> None:
    token = login_token(env)
    async with (
        signed_in(sites[0], *LOGIN) as browser,
        chat(sites[1], f"/ws/chat/t/?token={token}") as by_token,
        chat(sites[1], "/ws/chat/c/", cookie=browser.cookies["sessionid"]) as by_cookie,
    ):
        changed = await shell(env, DELETE_TOKEN)
        frames, code = await until_closed(by_token, since=changed)
        assert code == CLOSE_UNAUTHENTICATED
        assert frames == [{"type": "error", "message": TOKEN_GONE}]
        await answers_help(by_cookie)


async def test_logging_out_closes_the_sockets_of_that_login_and_no_other(
    sites: list[str], env: dict[str, str]
) -> None:
    async with (
        signed_in(sites[0], *LOGIN) as leaving,
        signed_in(sites[0], *LOGIN) as staying,
        chat(sites[1], "/ws/chat/l/", cookie=leaving.cookies["sessionid"]) as gone,
        chat(sites[1], "/ws/chat/l/", cookie=staying.cookies["sessionid"]) as kept,
    ):
        response = await leaving.post(
            "/accounts/logout/", data={"csrfmiddlewaretoken": leaving.cookies["csrftoken"]}
        )
        assert response.status_code == 302, response.text[:500]
        changed = time.monotonic()
        frames, code = await until_closed(gone, since=changed)
        assert code == CLOSE_UNAUTHENTICATED
        assert frames == [{"type": "error", "message": SIGNED_OUT}]
        await answers_help(kept)


async def test_a_password_change_closes_the_sockets_of_the_logins_it_ends(
    sites: list[str], env: dict[str, str]
) -> None:
    token = login_token(env)
    async with (
        signed_in(sites[0], *LOGIN) as browser,
        chat(sites[1], "/ws/chat/p/", cookie=browser.cookies["sessionid"]) as by_cookie,
        chat(sites[1], f"/ws/chat/p/?token={token}") as by_token,
    ):
        changed = await shell(env, CHANGE_PASSWORD)
        frames, code = await until_closed(by_cookie, since=changed)
        assert code == CLOSE_UNAUTHENTICATED
        assert frames == [{"type": "error", "message": SIGNED_OUT}]
        await answers_help(by_token)  # a token does not hang on the password


async def test_deleting_the_user_closes_their_socket_as_their_chats_go(
    sites: list[str], env: dict[str, str]
) -> None:
    token = login_token(env)
    async with chat(sites[1], f"/ws/chat/d/?token={token}") as socket:
        changed = await shell(env, DELETE_USER)
        frames, code = await until_closed(socket, since=changed)
    assert code == CLOSE_DELETED
    assert frames == [{"type": "error", "message": "this chat was deleted"}]
