"""The team layout of bench/concurrency.py: team chats, each open on several sockets, one
per member, where one member sends and every socket must receive the whole streamed reply.

Each team has as many members as a chat has viewers, each with a token of their own, and
a chat of its own is made for every pass through `POST /api/sessions {"team": slug}`, as a
member would: a fresh session has no history to make its turn longer. A chat's sockets are
spread over the daphne processes round robin from the chat's own index, so with two
processes the sender's process serves some viewers itself and hands the others the stream
through the channel layer. The sender sends once every socket of its chat shows all the
chat's members as looking, as in a chat its members have open already; without that wait,
sockets that have only just joined may hear of the turn late (`_open`).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import websockets

from bench._chat_replies import FAILURES, Reply, Tally
from bench._procs import Children

TIMEOUT = 120

# Run by `manage.py shell -c`: the teams, their members (no password: they use tokens) and
# a token each, printed as one line of JSON, {slug: [token, ...]}.
_MAKE_TEAMS = """
import json
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
from teams_app.services import create_team, set_members
User = get_user_model()
teams = {}
for t in range(%(teams)d):
    slug = f"bench-team-{t}"
    members = [User.objects.create_user(username=f"{slug}-{v}") for v in range(%(members)d)]
    set_members(team=create_team(slug=slug), users=members)
    teams[slug] = [Token.objects.create(user=member).key for member in members]
print("TEAMS " + json.dumps(teams))
"""


@dataclass(frozen=True)
class Team:
    slug: str
    tokens: list[str]  # one per member; the first sends


def make_teams(
    procs: Children, manage: list[str], env: dict[str, str], teams: int, members: int
) -> list[Team]:
    """`teams` teams of `members` each, and a file in each team's folder for the scripted
    turn to read, as a personal chat's turn reads its own."""
    script = _MAKE_TEAMS % {"teams": teams, "members": members}
    out = procs.run([*manage, "shell", "-c", script], name="manage", env=env)
    line = next(line for line in out.splitlines() if line.startswith("TEAMS "))
    made = [Team(slug, tokens) for slug, tokens in json.loads(line[6:]).items()]
    for team in made:
        folder = Path(env["AGENT_WORKSPACE"]) / "teams" / team.slug
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "hello.txt").write_text("Hello World\n")
    return made


async def new_chats(http_base: str, teams: list[Team]) -> list[str]:
    """A new chat of each team, made by its first member; their keys (`team:<id>`)."""
    async with httpx.AsyncClient(base_url=http_base, timeout=60) as client:

        async def one(team: Team) -> str:
            response = await client.post(
                "/api/sessions",
                json={"team": team.slug},
                headers={"Authorization": f"Token {team.tokens[0]}"},
            )
            response.raise_for_status()
            return str(response.json()["key"])

        return list(await asyncio.gather(*(one(team) for team in teams)))


async def _open(url: str, viewers: int, settle: float) -> Any:
    """A member's socket on a team chat, once it has its history and, with `settle`
    seconds for it, once its presence frame shows every one of the chat's `viewers`."""
    ws = await websockets.connect(url, max_size=None, open_timeout=60)
    try:
        # Once the socket has sent its history it is in the chat's group: every event of a
        # turn that starts later comes to it, though a socket that has only just joined
        # holds them until its own mark comes back through the layer (`doors.joining`).
        while json.loads(await ws.recv())["type"] != "history":
            pass
        if settle:
            # The others' hellos come after its mark: a socket that shows them all passes
            # the chat's frames on as they come, as the tab of a member already looking.
            async with asyncio.timeout(settle):
                while True:
                    frame = json.loads(await ws.recv())
                    if frame["type"] == "presence" and len(frame["viewers"]) >= viewers:
                        break
    except TimeoutError:
        await ws.close()
        raise TimeoutError(f"presence showed fewer than {viewers} viewers") from None
    except BaseException:
        await ws.close()
        raise
    return ws


async def team_turn(
    ws_bases: list[str], index: int, key: str, team: Team, tally: Tally, grace: float, settle: bool
) -> bool:
    """One team chat's turn: every member's socket open (with `settle`, until each shows
    them all as looking), the first member sends, and every socket reads the reply; whether
    the sender got it."""
    urls = [
        f"{ws_bases[(index + n) % len(ws_bases)]}/ws/chat/{key}/?token={token}"
        for n, token in enumerate(team.tokens)
    ]
    wait = grace if settle else 0.0
    opened = await asyncio.gather(
        *(_open(url, len(urls), wait) for url in urls), return_exceptions=True
    )
    sockets = [ws for ws in opened if not isinstance(ws, BaseException)]
    readers: list[asyncio.Task[bool]] = []
    try:
        for ws in opened:
            if isinstance(ws, BaseException):
                raise ws
        replies = [Reply() for _ in sockets]
        readers = [asyncio.create_task(r.read(ws)) for r, ws in zip(replies, sockets, strict=True)]
        await sockets[0].send(json.dumps({"type": "message", "content": "read it twice"}))
        async with asyncio.timeout(TIMEOUT):
            if not await readers[0]:
                return False
        # The others may come a little after the sender; one that never does lost the lot.
        await asyncio.wait(readers[1:], timeout=grace)
        count = len(ws_bases)
        for n, reply in enumerate(replies):
            tally.add(reply, replies[0].saved, elsewhere=n % count != 0)
        return True
    except (OSError, TimeoutError, websockets.WebSocketException) as exc:
        FAILURES[f"{type(exc).__name__}: {str(exc)[:60]}"] += 1
        return False
    finally:
        for reader in readers:
            if not reader.done():
                reader.cancel()
            elif not reader.cancelled():
                reader.exception()  # a viewer's closed socket: counted in its lost chunks
        await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)


async def measure_team(
    bases: list[str],
    keys: list[str],
    teams: list[Team],
    tally: Tally,
    grace: float,
    settle: bool = True,
) -> tuple[float, int]:
    """Every chat's turn at once (`keys`, one per team, from `new_chats`); seconds for them
    all and how many failed."""
    started = time.perf_counter()
    done = await asyncio.gather(
        *(
            team_turn(bases, index, key, team, tally, grace, settle)
            for index, (key, team) in enumerate(zip(keys, teams, strict=True))
        )
    )
    return time.perf_counter() - started, done.count(False)
