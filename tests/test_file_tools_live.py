"""Named pipes against a real site: one user's agent aims the file tools at pipes in its own
folder from many chats at once, and every call is refused plainly within seconds, while
another user's turn (a tool call and an answer) goes through meanwhile. Served by a real
daphne; afterwards no thread of it is left waiting in the open of a pipe, and it answers
as before."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent.tools.guards.folders import make_user_folder, user_folder
from tests.conftest import ROOT, add_login, free_port, manage, wait_for_port
from tests.llm_server import ScriptedLLM, Step, _last_user_text

pytestmark = pytest.mark.django_db(transaction=True)

# Far above what a refusal takes on a loaded machine, far below "never".
ANSWER_WITHIN = 45.0
REFUSED = "is a named pipe, not a regular file; file tools read and write regular files only"
# What the pipes are given to, several of each: the calls that opened a pipe without
# O_NONBLOCK waited for its other end, six of them every thread of daphne's shared pool.
PIPE_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("write_file", {"content": "x"}),
    ("write_file", {"content": "y"}),
    ("append_file", {"content": "x"}),
    ("append_file", {"content": "y"}),
    ("write_file", {"content": "z"}),
    ("append_file", {"content": "z"}),
    ("read_file", {}),
    ("edit_file", {"old_text": "a", "new_text": "b"}),
]


class RoutedLLM(ScriptedLLM):
    """A model that answers each conversation from its own messages, so that many turns can
    run at once: "call <tool> <json>" gets that call, and a tool's result gets the answer
    "done: <result>"."""

    _calls = itertools.count(1)

    def _next_step(self, body: dict[str, Any]) -> Step:
        with self._lock:
            self.requests.append(body)
        last = body["messages"][-1]
        if last["role"] == "tool":
            return Step("text", text=f"done: {last['content']}")
        tool, _, arguments = _last_user_text(body).partition("call ")[2].partition(" ")
        call = {"id": f"call_{next(self._calls)}", "name": tool, "arguments": arguments}
        return Step("tools", tool_calls=[call])


@pytest.fixture
def llm() -> Iterator[ScriptedLLM]:
    from agent.llm.client import _limits

    _limits.clear()
    with RoutedLLM() as server:
        yield server


@pytest.fixture
def daphne(site_env: dict[str, str], login_password: str) -> Iterator[tuple[str, int]]:
    """The site served by a real daphne process: its base URL and process id (the threads
    of which are looked at)."""
    add_login(site_env, login_password)
    port = free_port()
    command = [sys.executable, "-m", "agentsite.web", "-v", "0", "-b", "127.0.0.1", "-p", str(port)]
    server = subprocess.Popen([*command, "agentsite.asgi:application"], cwd=ROOT, env=site_env)
    try:
        wait_for_port(port, server)
        yield f"http://127.0.0.1:{port}", server.pid
    finally:
        server.terminate()
        server.wait(timeout=30)


def make_users(env: dict[str, str], *names: str) -> dict[str, str]:
    """Users of the served site, each with an API token; their tokens by name."""
    code = (
        "from django.contrib.auth.models import User\n"
        "from rest_framework.authtoken.models import Token\n"
        f"for name in {names!r}:\n"
        "    user = User.objects.create_user(name, password=f'pw-{name}-123')\n"
        "    print('token', name, Token.objects.create(user=user).key)\n"
    )
    lines = manage(env, "shell", "-c", code).splitlines()
    return dict(line.split()[1:] for line in lines if line.startswith("token "))


@pytest.fixture
def pipes(workspace: Path) -> Iterator[list[str]]:
    """Named pipes in alice's folder, one per call; whatever still waits on one when the
    test ends (a thread of an older server) is let go, so that the server can stop."""
    folder = make_user_folder(workspace, "alice")
    names = [f"pipe-{number}" for number in range(len(PIPE_CALLS))]
    for name in names:
        os.mkfifo(folder / name)
    yield names
    for name in names:
        both_ends = os.open(folder / name, os.O_RDWR | os.O_NONBLOCK)
        os.close(both_ends)


async def chat_turn(site: str, token: str, chat: str, message: str) -> str:
    """The assistant's answer to `message` in `chat`, over the site's socket."""
    import websockets

    url = site.replace("http", "ws") + f"/ws/chat/{chat}/?token={token}"
    async with websockets.connect(url, origin=site) as socket:
        assert json.loads(await socket.recv())["type"] == "history"
        await socket.send(json.dumps({"type": "message", "content": message}))
        while True:
            frame = json.loads(await socket.recv())
            if frame["type"] == "message" and frame.get("role", "assistant") == "assistant":
                return str(frame["content"])
            assert frame["type"] != "error", frame


def threads_in_a_pipes_open(pid: int) -> list[str]:
    """The threads of process `pid` that wait in the open of a named pipe for its other end."""
    waiting = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            where = (task / "wchan").read_text()
        except OSError:  # ended meanwhile
            continue
        if where in ("wait_for_partner", "fifo_open"):
            waiting.append(f"{task.name}: {where}")
    return waiting


async def test_pipes_are_refused_at_once_and_another_users_turn_goes_on(
    daphne: tuple[str, int],
    site_env: dict[str, str],
    workspace: Path,
    pipes: list[str],
) -> None:
    site, pid = daphne
    tokens = make_users(site_env, "alice", "bob")
    calls = [
        chat_turn(
            site,
            tokens["alice"],
            f"pipes-{number}",
            f"call {tool} " + json.dumps({"path": pipe, **extra}),
        )
        for number, (pipe, (tool, extra)) in enumerate(zip(pipes, PIPE_CALLS, strict=True))
    ]
    note = json.dumps({"path": "notes.txt", "content": "bob's"})
    async with asyncio.timeout(ANSWER_WITHIN):
        *answers, bobs = await asyncio.gather(
            *calls, chat_turn(site, tokens["bob"], "notes", f"call write_file {note}")
        )

    for pipe, answer in zip(pipes, answers, strict=True):
        assert answer == f"done: Error: '{pipe}' {REFUSED}"
    assert bobs == "done: Wrote 5 bytes to notes.txt"
    assert (user_folder(workspace, "bob") / "notes.txt").read_text() == "bob's"
    folder = user_folder(workspace, "alice")
    assert all((folder / pipe).is_fifo() for pipe in pipes)
    # Nothing is left waiting, and the server goes on answering everyone.
    assert threads_in_a_pipes_open(pid) == []
    async with httpx.AsyncClient(base_url=site, timeout=ANSWER_WITHIN) as client:
        assert (await client.get("/api/health")).status_code == 200
    async with asyncio.timeout(ANSWER_WITHIN):
        read = json.dumps({"path": "notes.txt"})
        again = await chat_turn(site, tokens["bob"], "notes", f"call read_file {read}")
    assert again == "done:      1\tbob's"
