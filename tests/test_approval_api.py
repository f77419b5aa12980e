"""Tools that wait for a person, through the task API over real HTTP (a daphne process): a
task shows what it waits on, is answered through its `approve` endpoint, and goes on; a bad
answer is a 400, 404 or 409 that changes nothing. `/api/approvals` and the session's PATCH
add tools that wait."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import login_token
from tests.llm_server import ScriptedLLM
from tests.test_prompt_files_live import make_user

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def site_env(site_env: dict[str, str]) -> dict[str, str]:
    return {**site_env, "AGENT_APPROVE_TOOLS": "write_file, mcp_*"}


@pytest.fixture
def client(live_site: str, site_env: dict[str, str]) -> Iterator[httpx.Client]:
    token = login_token(site_env)
    headers = {"Authorization": f"Token {token}"}
    with httpx.Client(base_url=live_site, headers=headers, timeout=30) as http:
        yield http


def other_user(live_site: str, site_env: dict[str, str]) -> httpx.Client:
    token = make_user(site_env, "bob")
    return httpx.Client(base_url=live_site, headers={"Authorization": f"Token {token}"}, timeout=30)


def test_a_task_waits_is_answered_and_goes_on(
    client: httpx.Client, live_site: str, site_env: dict[str, str], llm: ScriptedLLM
) -> None:
    llm.tool_calls(
        [("list_dir", {"path": "."}), ("write_file", {"path": "r.txt", "content": "report"})]
    ).reply("Filed the report.")
    answer = client.post("/api/tasks", json={"prompt": "file a report"})
    assert answer.status_code == 200, answer.text
    task = answer.json()
    assert task["status"] == "waiting" and task["success"] is False
    assert task["tools_used"] == ["list_dir"] and task["iterations"] == 1
    (call,) = task["pending"]
    assert call["name"] == "write_file"
    assert call["arguments"] == {"path": "r.txt", "content": "report"}
    assert client.get(f"/api/tasks/{task['id']}").json()["pending"] == [call]
    url = f"/api/tasks/{task['id']}/approve"

    # Bad answers change nothing.
    assert client.post(url, json={"call_id": call["id"]}).status_code == 400
    assert client.post(url, json={"call_id": call["id"], "allow": "maybe"}).status_code == 400
    missing = client.post(url, json={"call_id": "call_nope", "allow": True})
    assert missing.status_code == 404 and "call_nope" in missing.json()["detail"]
    with other_user(live_site, site_env) as bob:
        assert bob.post(url, json={"call_id": call["id"], "allow": True}).status_code == 404
        assert bob.get("/api/approvals").json()["pending"] == []
    assert client.get(f"/api/tasks/{task['id']}").json()["status"] == "waiting"
    assert len(llm.requests) == 1
    waiting = client.get("/api/approvals").json()["pending"]
    assert [(w["id"], w["task"], w["session"]) for w in waiting] == [
        (call["id"], task["id"], task["session"])
    ]

    done = client.post(url, json={"call_id": call["id"], "allow": True})
    assert done.status_code == 200, done.text
    task = done.json()
    assert task["status"] == "succeeded" and task["text"] == "Filed the report."
    assert task["pending"] == [] and task["tools_used"] == ["list_dir", "write_file"]
    results = [m for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert results[-1]["tool_call_id"] == call["id"] and results[-1]["content"].startswith("Wrote")

    again = client.post(url, json={"call_id": call["id"], "allow": False})
    assert again.status_code == 409 and "already answered" in again.json()["detail"]
    assert client.get("/api/approvals").json()["pending"] == []


def test_a_no_a_queued_answer_and_a_cancel(client: httpx.Client, llm: ScriptedLLM) -> None:
    llm.tool_call("write_file", {"path": "x.txt", "content": "x"}).reply("I did not write it.")
    task = client.post("/api/tasks", json={"prompt": "write x", "session": "api:no"}).json()
    call = task["pending"][0]
    done = client.post(
        f"/api/tasks/{task['id']}/approve", json={"call_id": call["id"], "allow": False}
    ).json()
    assert done["status"] == "succeeded" and done["text"] == "I did not write it."
    (result,) = [m for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert result["content"].startswith("Error: the user declined write_file(path='x.txt'")

    # Without `wait` the worker goes on with it: until then it waits on nothing.
    llm.tool_call("write_file", {"path": "y.txt", "content": "y"})
    task = client.post("/api/tasks", json={"prompt": "write y", "session": "api:no"}).json()
    queued = client.post(
        f"/api/tasks/{task['id']}/approve",
        json={"call_id": task["pending"][0]["id"], "allow": True, "wait": False},
    )
    assert queued.status_code == 202
    assert queued.json()["status"] == "waiting" and queued.json()["pending"] == []

    # A cancel ends a waiting task, and its calls can no longer be answered.
    llm.tool_call("write_file", {"path": "z.txt", "content": "z"})
    task = client.post("/api/tasks", json={"prompt": "write z", "session": "api:cancel"}).json()
    cancelled = client.post(f"/api/tasks/{task['id']}/cancel").json()
    assert cancelled["status"] == "cancelled" and cancelled["pending"] == []
    late = client.post(
        f"/api/tasks/{task['id']}/approve",
        json={"call_id": task["pending"][0]["id"], "allow": True},
    )
    assert late.status_code == 409


def test_users_and_sessions_add_tools_that_wait(client: httpx.Client, llm: ScriptedLLM) -> None:
    state = client.get("/api/approvals").json()
    assert state["operator"] == ["write_file", "mcp_*"] and state["approve_tools"] == []
    assert client.put("/api/approvals", json={"approve_tools": "exec"}).status_code == 400
    assert client.put("/api/approvals", json={"approve_tools": ["ex ec"]}).status_code == 400
    state = client.put("/api/approvals", json={"approve_tools": ["list_*"]}).json()
    assert state["approve_tools"] == ["list_*"]

    llm.tool_call("list_dir", {"path": "."})
    task = client.post("/api/tasks", json={"prompt": "list", "session": "api:mine"}).json()
    assert [c["name"] for c in task["pending"]] == ["list_dir"]
    client.post(f"/api/tasks/{task['id']}/cancel")
    client.patch("/api/approvals", json={"approve_tools": []})

    session = client.patch(
        "/api/sessions/api:mine", json={"approve_tools": ["read_file"], "title": "Mine"}
    ).json()
    assert session["approve_tools"] == ["read_file"] and session["allowed_tools"] == []
    assert session["title"] == "Mine"
    llm.tool_call("read_file", {"path": "notes.md"})
    task = client.post("/api/tasks", json={"prompt": "read", "session": "api:mine"}).json()
    (call,) = task["pending"]
    llm.reply("Read it.")
    done = client.post(
        f"/api/tasks/{task['id']}/approve",
        json={"call_id": call["id"], "allow": True, "always": True},
    ).json()
    assert done["status"] == "succeeded"
    assert client.get("/api/sessions/api:mine").json()["allowed_tools"] == ["read_file"]

    # "always" is given by answering a call; the list may only shrink here.
    refused = client.patch("/api/sessions/api:mine", json={"allowed_tools": ["exec"]})
    assert refused.status_code == 400 and "allowed_tools" in refused.json()
    taken_back = client.patch("/api/sessions/api:mine", json={"allowed_tools": []})
    assert taken_back.json()["allowed_tools"] == []


def test_an_openai_client_cannot_answer_so_its_turn_does_not_wait(
    client: httpx.Client, live_site: str, site_env: dict[str, str], llm: ScriptedLLM
) -> None:
    """A client of the OpenAI door brings its own conversation and reads one answer: a tool
    that waits for a person is refused at once, and the turn goes on."""
    token = client.headers["Authorization"].split()[1]
    llm.tool_call("write_file", {"path": "o.txt", "content": "o"}).reply("Not allowed here.")
    answer = httpx.post(
        f"{live_site}/v1/chat/completions",
        headers={"Authorization": f"Bearer {token}"},
        json={"model": "agentsite", "messages": [{"role": "user", "content": "write o.txt"}]},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == "Not allowed here."
    (result,) = [m for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert result["content"].startswith("Error: write_file waits for a person's approval")
    assert client.get("/api/approvals").json()["pending"] == []
