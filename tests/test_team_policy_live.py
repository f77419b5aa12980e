"""Teams over real HTTP on a real daphne: staff make a team whose policy leaves `exec` out,
its member's tasks and chat completions are not offered it, `/api/me` says so and why, and
a plain member cannot make teams."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import login_token, run_manage
from tests.llm_server import ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)

MAKE_MEMBER = (
    "from django.contrib.auth.models import User; "
    "from rest_framework.authtoken.models import Token; "
    "u = User.objects.create_user('mia', password='pw-mia-123'); "
    "print(Token.objects.create(user=u).key)"
)


def offered(request: dict) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools", [])}


def test_a_teams_policy_holds_at_the_api_and_the_openai_door(
    live_site: str, site_env: dict[str, str], llm: ScriptedLLM
) -> None:
    made = run_manage(site_env, "shell", "-c", MAKE_MEMBER)
    assert made.returncode == 0, made.stderr
    # The shell's own notes (the models it imported) come first; the key is the last line.
    member = {"Authorization": f"Token {made.stdout.split()[-1]}"}
    staff = {"Authorization": f"Token {login_token(site_env)}"}
    with httpx.Client(base_url=live_site, timeout=30) as client:
        body = {
            "slug": "support",
            "name": "Support",
            "members": ["mia"],
            "policy": {"tools": ["read_file", "list_dir"], "approve_tools": ["write_file"]},
        }
        refused = client.post("/api/teams", json=body, headers=member)
        assert refused.status_code == 403, refused.text
        created = client.post("/api/teams", json=body, headers=staff)
        assert created.status_code == 201, created.text

        me = client.get("/api/me", headers=member).json()
        assert me["user"]["username"] == "mia"
        assert me["teams"] == [{"slug": "support", "name": "Support", "admin": False}]
        assert me["policy"]["tools"] == {
            "value": ["read_file", "list_dir"],
            "source": "team:support",
        }
        assert {"value": "write_file", "source": "team:support"} in me["policy"]["approve_tools"]

        llm.reply("Done.")
        task = client.post("/api/tasks", json={"prompt": "hello"}, headers=member)
        assert task.status_code == 200, task.text
        assert offered(llm.requests[-1]) == {"read_file", "list_dir"}

        asked = client.post("/api/tasks", json={"prompt": "x", "tools": ["exec"]}, headers=member)
        assert asked.status_code == 400
        assert "not allowed by your team support's policy" in asked.json()["tools"][0]

        llm.reply("Fine.")
        chat = client.post(
            "/v1/chat/completions",
            json={"model": "agentsite", "messages": [{"role": "user", "content": "hi"}]},
            headers=member,
        )
        assert chat.status_code == 200, chat.text
        assert offered(llm.requests[-1]) == {"read_file", "list_dir"}

        llm.reply("All tools.")
        client.post("/api/tasks", json={"prompt": "hello"}, headers=staff)
        assert "exec" in offered(llm.requests[-1])
