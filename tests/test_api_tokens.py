"""Named API tokens over real HTTP on a real daphne: made through `/api/tokens`, each works at
every door (the API with `Token` and `Bearer`, the OpenAI door, the chat socket) until it is
revoked or expires, when every door refuses it and the sockets it opened close. Listed
without its secret; someone else's is not found; the DRF tokens keep working; making and
revoking one is in the audit log with the person as who did it."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from tests.conftest import LOGIN, login_token, run_manage
from tests.test_socket_revocation_live import SiteRecords

pytestmark = pytest.mark.django_db(transaction=True)

CLOSE_UNAUTHENTICATED = 4401
TOKEN_GONE = (
    "the token this chat was opened with has been deleted: open it again with a valid token"
)
TOKEN_EXPIRED = "the token this chat was opened with has expired: open it again with a valid token"
# Someone else's token and one that never was: the same answer, which tells nothing.
NO_SUCH_TOKEN = {"detail": "no such token of yours"}
# `auditlog.models.LogEntry.Action`
CREATE, DELETE = 0, 2


def auth(secret: str, scheme: str = "Token") -> dict[str, str]:
    return {"Authorization": f"{scheme} {secret}"}


@pytest.fixture
def admin_key(live_site: str, site_env: dict[str, str]) -> str:
    """The DRF token of `LOGIN`, as `manage.py drf_create_token` makes it."""
    return login_token(site_env)


@pytest.fixture
async def client(live_site: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=live_site, timeout=30) as http:
        yield http


async def make_token(client: httpx.AsyncClient, key: str, **body: Any) -> dict[str, Any]:
    answer = await client.post("/api/tokens", json=body, headers=auth(key))
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


@asynccontextmanager
async def socket_with(base: str, chat: str, secret: str) -> AsyncIterator[Any]:
    """A chat socket opened as a script opens one: `?token=`, no Origin; its history read."""
    import websockets

    url = base.replace("http", "ws") + f"/ws/chat/{chat}/?token={secret}"
    async with websockets.connect(url) as socket:
        assert json.loads(await asyncio.wait_for(socket.recv(), 10))["type"] == "history"
        yield socket


async def refused_socket(base: str, secret: str) -> int:
    """The close code of a socket opened with `secret`, which must be closed at once."""
    import websockets

    url = base.replace("http", "ws") + f"/ws/chat/refused/?token={secret}"
    async with websockets.connect(url) as socket:
        with pytest.raises(websockets.ConnectionClosed):
            await asyncio.wait_for(socket.recv(), 10)
        return int(socket.close_code or 0)


async def closed_with(socket: Any, within: float) -> tuple[list[Any], int]:
    """The frames `socket` gets until it closes (within `within` seconds), and its code."""
    import websockets

    frames = []
    try:
        async with asyncio.timeout(within):
            while True:
                frames.append(json.loads(await socket.recv()))
    except websockets.ConnectionClosed:
        return frames, int(socket.close_code or 0)
    except TimeoutError:
        raise AssertionError(f"still open after {within} s: {frames}") from None


async def answers(socket: Any) -> None:
    await socket.send(json.dumps({"type": "message", "content": "/help"}))
    while True:
        frame = json.loads(await asyncio.wait_for(socket.recv(), 10))
        if frame["type"] == "message" and frame["role"] == "assistant":
            assert frame["content"].startswith("Commands")
            return


def audit_of(records: SiteRecords, token_id: int) -> list[tuple[int, str | None, str]]:
    """The audit log's entries about token `token_id`: action, actor's name, changes."""
    rows = records.rows(
        "SELECT e.action, u.username, e.changes FROM auditlog_logentry e"
        " JOIN django_content_type t ON t.id = e.content_type_id"
        " LEFT JOIN auth_user u ON u.id = e.actor_id"
        " WHERE t.app_label = 'teams_app' AND t.model = 'apitoken' AND e.object_pk = ?"
        " ORDER BY e.id",
        str(token_id),
    )
    return [(action, actor, json.dumps(changes)) for action, actor, changes in rows]


async def test_a_named_token_works_at_every_door_until_it_is_revoked(
    live_site: str, site_env: dict[str, str], client: httpx.AsyncClient, admin_key: str
) -> None:
    before = datetime.now(UTC)
    made = await make_token(client, admin_key, name="laptop", expires_in_days=30)
    secret = made["token"]
    assert set(made) == {"id", "name", "token", "expires", "created"}
    assert made["name"] == "laptop" and secret.startswith("ast_")
    expires = datetime.fromisoformat(made["expires"])
    assert before + timedelta(days=30) <= expires <= datetime.now(UTC) + timedelta(days=30)

    # The API, with either keyword.
    for scheme in ("Token", "Bearer", "bearer"):
        answer = await client.get("/api/tokens", headers=auth(secret, scheme))
        assert answer.status_code == 200, (scheme, answer.text)
    (listed,) = answer.json()
    assert listed["id"] == made["id"] and listed["prefix"] == secret[:8]
    assert listed["expired"] is False and listed["expires"] == made["expires"]
    assert listed["last_used"] is not None
    assert before <= datetime.fromisoformat(listed["last_used"]) <= datetime.now(UTC)
    assert secret not in answer.text and "digest" not in listed and "token" not in listed
    # The OpenAI door.
    models = await client.get("/v1/models", headers=auth(secret, "Bearer"))
    assert models.status_code == 200 and models.json()["object"] == "list"
    # Its last use is written once a minute at most, not at each request.
    (again,) = (await client.get("/api/tokens", headers=auth(admin_key))).json()
    assert again["last_used"] == listed["last_used"]

    async with socket_with(live_site, "by-named-token", secret) as socket:
        await answers(socket)
        gone = await client.delete(f"/api/tokens/{made['id']}", headers=auth(admin_key))
        assert gone.status_code == 204, gone.text
        frames, code = await closed_with(socket, within=2)
    assert frames == [{"type": "error", "message": TOKEN_GONE}]
    assert code == CLOSE_UNAUTHENTICATED

    for scheme in ("Token", "Bearer"):
        refused = await client.get("/api/sessions", headers=auth(secret, scheme))
        assert refused.status_code == 401 and refused.json() == {"detail": "Invalid token."}
    refused = await client.get("/v1/models", headers=auth(secret, "Bearer"))
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "invalid_api_key"
    assert await refused_socket(live_site, secret) == CLOSE_UNAUTHENTICATED
    # Gone from the list; deleting it again finds nothing.
    assert (await client.get("/api/tokens", headers=auth(admin_key))).json() == []
    again = await client.delete(f"/api/tokens/{made['id']}", headers=auth(admin_key))
    assert again.status_code == 404 and again.json() == NO_SUCH_TOKEN

    # Made and revoked by the person, as the audit log says; never its secret nor digest.
    entries = audit_of(SiteRecords(site_env), made["id"])
    assert [(action, actor) for action, actor, _ in entries] == [
        (CREATE, LOGIN[0]),
        (DELETE, LOGIN[0]),
    ]
    assert "laptop" in entries[0][2]
    assert not any(secret in changes or secret[8:20] in changes for *_, changes in entries)
    assert not any("digest" in changes for *_, changes in entries)


async def test_a_token_made_with_a_named_token_is_audited_as_its_person(
    live_site: str, site_env: dict[str, str], client: httpx.AsyncClient, admin_key: str
) -> None:
    first = await make_token(client, admin_key, name="first")
    second = await make_token(client, first["token"], name="made with a named token")
    gone = await client.delete(f"/api/tokens/{second['id']}", headers=auth(first["token"]))
    assert gone.status_code == 204
    entries = audit_of(SiteRecords(site_env), second["id"])
    assert [(action, actor) for action, actor, _ in entries] == [
        (CREATE, LOGIN[0]),
        (DELETE, LOGIN[0]),
    ]


async def test_an_expired_token_is_refused_saying_so_and_its_socket_closes(
    live_site: str, client: httpx.AsyncClient, admin_key: str
) -> None:
    soon = datetime.now(UTC) + timedelta(seconds=4)
    made = await make_token(client, admin_key, name="short-lived", expires=soon.isoformat())
    secret = made["token"]
    assert datetime.fromisoformat(made["expires"]) == soon
    assert (await client.get("/api/tokens", headers=auth(secret))).status_code == 200

    async with socket_with(live_site, "short-lived", secret) as socket:
        await answers(socket)
        # Closed once it expires: by the web process's poll of its sockets (every half a
        # second, or five with Redis, whose messages announce deletions but no expiry).
        frames, code = await closed_with(socket, within=soon.timestamp() - time.time() + 6)
    assert datetime.now(UTC) >= soon
    assert frames == [{"type": "error", "message": TOKEN_EXPIRED}]
    assert code == CLOSE_UNAUTHENTICATED

    refused = await client.get("/api/sessions", headers=auth(secret, "Bearer"))
    assert refused.status_code == 401
    assert refused.json()["detail"].startswith("This API token expired at ")
    refused = await client.get("/v1/models", headers=auth(secret, "Bearer"))
    assert refused.status_code == 401
    assert "expired" in refused.json()["error"]["message"]
    assert await refused_socket(live_site, secret) == CLOSE_UNAUTHENTICATED
    # Still listed, as expired, until its person revokes it.
    (listed,) = (await client.get("/api/tokens", headers=auth(admin_key))).json()
    assert listed["id"] == made["id"] and listed["expired"] is True


def make_bob(site_env: dict[str, str]) -> str:
    """A second person, `bob`, on the site; his DRF token's key."""
    code = (
        "from django.contrib.auth.models import User\n"
        "from rest_framework.authtoken.models import Token\n"
        "bob = User.objects.create_user('bob', password='bob-pass-123')\n"
        "print(Token.objects.create(user=bob).key)\n"
    )
    done = run_manage(site_env, "shell", "-c", code)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


async def test_someone_elses_token_is_not_found_and_not_listed(
    live_site: str, site_env: dict[str, str], client: httpx.AsyncClient, admin_key: str
) -> None:
    bob_key = await asyncio.to_thread(make_bob, site_env)
    bobs = await make_token(client, bob_key, name="bob's")
    mine = await make_token(client, admin_key, name="mine")
    stolen = await client.delete(f"/api/tokens/{bobs['id']}", headers=auth(admin_key))
    assert stolen.status_code == 404 and stolen.json() == NO_SUCH_TOKEN
    listed = (await client.get("/api/tokens", headers=auth(admin_key))).json()
    assert [token["id"] for token in listed] == [mine["id"]]
    listed = (await client.get("/api/tokens", headers=auth(bob_key))).json()
    assert [token["id"] for token in listed] == [bobs["id"]]
    # Bob's still works: it was not deleted.
    assert (await client.get("/api/tokens", headers=auth(bobs["token"]))).status_code == 200


async def test_what_a_new_token_may_be(client: httpx.AsyncClient, admin_key: str) -> None:
    past = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
    cases: list[tuple[dict[str, Any], str]] = [
        ({}, "name"),
        ({"name": ""}, "name"),
        ({"name": "   "}, "name"),
        ({"name": "x" * 101}, "name"),
        ({"name": "t", "expires": past}, "expires"),
        ({"name": "t", "expires": "tomorrow"}, "expires"),
        ({"name": "t", "expires_in_days": 0}, "expires_in_days"),
        ({"name": "t", "expires_in_days": 3651}, "expires_in_days"),
        ({"name": "t", "token": "ast_mine"}, "token"),
    ]
    for body, field in cases:
        answer = await client.post("/api/tokens", json=body, headers=auth(admin_key))
        assert answer.status_code == 400, (body, answer.text)
        assert field in answer.json(), (body, answer.json())
    never = await make_token(client, admin_key, name="x" * 100, expires=None)
    assert never["expires"] is None

    # At most fifty each.
    for number in range(49):
        await make_token(client, admin_key, name=f"token {number}")
    full = await client.post("/api/tokens", json={"name": "one more"}, headers=auth(admin_key))
    assert full.status_code == 400
    assert "50 API tokens" in full.json()["detail"]
    listed = (await client.get("/api/tokens", headers=auth(admin_key))).json()
    assert len(listed) == 50


async def test_drf_tokens_still_work_at_every_door(
    live_site: str, client: httpx.AsyncClient, admin_key: str
) -> None:
    for scheme in ("Token", "Bearer"):
        answer = await client.get("/api/sessions", headers=auth(admin_key, scheme))
        assert answer.status_code == 200, answer.text
    assert (await client.get("/v1/models", headers=auth(admin_key, "Bearer"))).status_code == 200
    async with socket_with(live_site, "by-drf-token", admin_key) as socket:
        await answers(socket)
    wrong = await client.get("/api/sessions", headers=auth("0" * 40))
    assert wrong.status_code == 401 and wrong.json() == {"detail": "Invalid token."}
    assert wrong.headers["WWW-Authenticate"] == "Token"


@pytest.mark.django_db
def test_the_last_use_is_written_when_the_one_kept_is_a_minute_old(ada: Any) -> None:
    from django.utils import timezone

    from teams_app.models import ApiToken
    from teams_app.services import create_token
    from teams_app.tokens import user_for_secret

    token, secret = create_token(user=ada, name="script")
    for age, written in [(timedelta(seconds=30), False), (timedelta(seconds=90), True)]:
        kept = timezone.now() - age
        ApiToken.objects.filter(pk=token.pk).update(last_used=kept)
        assert user_for_secret(secret) == (ada, token)
        now = ApiToken.objects.get(pk=token.pk).last_used
        assert now is not None and (now > kept) is written, age
