"""What a deactivation by the identity provider's provisioning does, on a real server: the
person's open chat closes within a second, and their API token stops working."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.conftest import manage
from tests.test_scim import BASE, PATCH_OP, SCIM_JSON, TOKEN, entra_user
from tests.test_socket_revocation_live import CLOSE_UNAUTHENTICATED, INACTIVE, chat, until_closed

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_person_entra_deactivates_loses_their_open_chat_and_their_api_token(
    site_env: dict[str, str], request: pytest.FixtureRequest
) -> None:
    site_env["AGENT_SCIM_TOKEN"] = TOKEN
    base = request.getfixturevalue("live_site")
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": SCIM_JSON}
    async with httpx.AsyncClient(base_url=f"{base}{BASE}", headers=headers, timeout=30) as idp:
        created = await idp.post("/Users", json=entra_user())
        assert created.status_code == 201, created.text
        ada = created.json()
        group = await idp.post(
            "/Groups", json={"displayName": "Research", "members": [{"value": ada["id"]}]}
        )
        assert group.status_code == 201, group.text
        output = manage(site_env, "drf_create_token", "ada@example.org")
        token = output.split()[2]
        async with httpx.AsyncClient(
            base_url=base, headers={"Authorization": f"Token {token}"}, timeout=30
        ) as api:
            me = await api.get("/api/me")
            assert me.status_code == 200, me.text
            assert [team["slug"] for team in me.json()["teams"]] == ["research"]
            async with chat(base, f"/ws/chat/scim/?token={token}") as socket:
                sent = time.monotonic()
                off = await idp.patch(
                    f"/Users/{ada['id']}",
                    json={
                        "schemas": [PATCH_OP],
                        "Operations": [{"op": "Replace", "path": "active", "value": "False"}],
                    },
                )
                assert off.status_code == 200, off.text
                frames, code = await until_closed(socket, since=sent)
            assert code == CLOSE_UNAUTHENTICATED
            assert frames == [{"type": "error", "message": INACTIVE}]
            assert (await api.get("/api/me")).status_code == 401
