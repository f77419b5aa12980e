"""Every door over a real daphne when the model sends text no store or wire takes as it is:
a lone surrogate (sent as a JSON escape, as a model sends it) and a NUL in its text, its
reasoning and its tool call's arguments, and a command whose output holds a NUL. The task
API (waiting and queued), the OpenAI door (plain and streamed), the chat socket and the
list of calls that wait each answer plainly, and what is saved is the cleaned text, on
SQLite and on PostgreSQL, which stores no NUL."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from agent.cleantext import REPLACEMENT
from tests.conftest import ROOT, login_token
from tests.llm_server import ScriptedLLM
from tests.test_history_frames import chat, turn

pytestmark = pytest.mark.django_db(transaction=True)

BAD = "\udc80 and \x00"
CLEAN = f"{REPLACEMENT} and {REPLACEMENT}"
# printf writes a NUL of its own between a and b.
COMMAND = f"printf 'a\\000b {BAD}'"
SENT_COMMAND = f"printf 'a\\000b {CLEAN}'"
OUTPUT = f"a{REPLACEMENT}b {CLEAN}"


@pytest.fixture
def site_env(site_env: dict[str, str]) -> dict[str, str]:
    return {**site_env, "AGENT_APPROVE_TOOLS": "write_file"}


@pytest.fixture
def api(live_site: str, site_env: dict[str, str]) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Token {login_token(site_env)}"}
    with httpx.Client(base_url=live_site, headers=headers, timeout=60) as client:
        yield client


def script_turn(llm: ScriptedLLM) -> None:
    """A turn whose model says BAD everywhere it can and runs a command with a NUL in its
    output; its final reply is `Done CLEAN`."""
    llm.tool_call("exec", {"command": COMMAND}, text=f"Looking {BAD}", reasoning=f"First {BAD}")
    llm.reply(f"Done {BAD}", reasoning=f"Then {BAD}")


def assert_kept(api: httpx.Client, session: str) -> None:
    """The session holds the whole turn, cleaned."""
    listed = api.get(f"/api/sessions/{session}/messages")
    assert listed.status_code == 200, listed.text
    messages = listed.json()
    messages = messages["results"] if isinstance(messages, dict) else messages
    user, asked, ran, answered = messages[-4:]
    assert user["role"] == "user"
    assert (asked["content"], asked["reasoning_content"]) == (f"Looking {CLEAN}", f"First {CLEAN}")
    (call,) = asked["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"command": SENT_COMMAND}
    assert ran["role"] == "tool" and ran["tool_call_id"] == call["id"]
    assert OUTPUT in ran["content"]
    assert (answered["content"], answered["reasoning_content"]) == (
        f"Done {CLEAN}",
        f"Then {CLEAN}",
    )


def assert_sent_back(llm: ScriptedLLM) -> None:
    """The model's second call got the cleaned call and the command's cleaned output."""
    messages = llm.requests[-1]["messages"]
    asked, ran = messages[-2:]
    (call,) = asked["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"command": SENT_COMMAND}
    assert asked["content"] == f"Looking {CLEAN}"
    assert ran["tool_call_id"] == call["id"] and OUTPUT in ran["content"]


def test_the_task_api_answers_a_task_that_waits_and_one_that_is_queued(
    api: httpx.Client, site_env: dict[str, str], llm: ScriptedLLM
) -> None:
    script_turn(llm)
    answer = api.post("/api/tasks", json={"prompt": "look", "session": "api:bad"})

    assert answer.status_code == 200, answer.text
    task = answer.json()
    assert (task["status"], task["text"], task["error"]) == ("succeeded", f"Done {CLEAN}", None)
    assert task["tools_used"] == ["exec"]
    assert_sent_back(llm)
    assert_kept(api, "api:bad")
    assert api.get(f"/api/tasks/{task['id']}").status_code == 200

    script_turn(llm)
    queued = api.post("/api/tasks", json={"prompt": "again", "session": "api:q", "wait": False})
    assert queued.status_code == 202, queued.text
    task = queued.json()
    worker = subprocess.Popen([sys.executable, "manage.py", "qcluster"], cwd=ROOT, env=site_env)
    try:
        deadline = time.monotonic() + 90
        while task["status"] in ("queued", "running"):
            assert time.monotonic() < deadline, f"the worker never finished: {task}"
            time.sleep(0.3)
            seen = api.get(f"/api/tasks/{task['id']}")
            assert seen.status_code == 200, seen.text
            task = seen.json()
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    assert (task["status"], task["text"]) == ("succeeded", f"Done {CLEAN}")
    assert_kept(api, "api:q")


BODY = {"model": "agentsite", "messages": [{"role": "user", "content": "look"}]}


def bearer(site_env: dict[str, str]) -> dict[str, str]:
    return {"Authorization": f"Bearer {login_token(site_env)}"}


def test_the_openai_door_answers_plainly(
    api: httpx.Client, site_env: dict[str, str], llm: ScriptedLLM
) -> None:
    script_turn(llm)
    plain = api.post(
        "/v1/chat/completions", json={**BODY, "user": "plain"}, headers=bearer(site_env)
    )

    assert plain.status_code == 200, plain.text
    message = plain.json()["choices"][0]["message"]
    assert message["content"] == f"Done {CLEAN}"
    assert f"First {CLEAN}" in message["reasoning_content"]
    assert_sent_back(llm)
    assert_kept(api, "openai:plain")


def test_the_openai_doors_stream_ends_with_done(
    api: httpx.Client, site_env: dict[str, str], llm: ScriptedLLM
) -> None:
    script_turn(llm)
    with api.stream(
        "POST",
        "/v1/chat/completions",
        json={**BODY, "stream": True, "user": "streamed"},
        headers=bearer(site_env),
    ) as streamed:
        assert streamed.status_code == 200
        events = [line for line in streamed.iter_lines() if line.startswith("data: ")]

    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(event[len("data: ") :]) for event in events[:-1]]
    assert not [chunk for chunk in chunks if "error" in chunk]
    deltas = [chunk["choices"][0]["delta"] for chunk in chunks if chunk["choices"]]
    content = "".join(delta.get("content") or "" for delta in deltas)
    reasoning = "".join(delta.get("reasoning_content") or "" for delta in deltas)
    assert content.startswith(f"Looking {CLEAN}") and content.endswith(f"Done {CLEAN}")
    assert f"First {CLEAN}" in reasoning and OUTPUT in reasoning
    assert_sent_back(llm)
    assert_kept(api, "openai:streamed")


async def test_the_chat_socket_streams_what_it_keeps(
    live_site: str, site_env: dict[str, str], llm: ScriptedLLM
) -> None:
    script_turn(llm)
    site = (live_site, login_token(site_env))

    async with chat(site, "bad") as (socket, _):
        frames = await turn(socket, "look")

    assert not [frame for frame in frames if frame["type"] == "error"]
    streamed = "".join(f["content"] for f in frames if f["type"] == "stream_chunk")
    assert streamed == f"Looking {CLEAN}Done {CLEAN}"
    thinking = "".join(f["content"] for f in frames if f["type"] == "thinking")
    assert thinking == f"First {CLEAN}Then {CLEAN}"
    (call,) = [f for f in frames if f["type"] == "tool_call"]
    assert call["arguments"] == {"command": SENT_COMMAND}
    (result,) = [f for f in frames if f["type"] == "tool_result"]
    assert OUTPUT in result["result"]
    replies = [f for f in frames if f["type"] == "message" and f["role"] == "assistant"]
    assert [reply["content"] for reply in replies] == [f"Done {CLEAN}"]

    async with chat(site, "bad") as (_, history):
        kept = [m["content"] for m in history["messages"] if m["role"] == "assistant"]
    assert kept == [f"Looking {CLEAN}", f"Done {CLEAN}"]


# A low surrogate alone (the escape \udc80 and no NUL beside it) went past the cleaning of
# arguments, and PostgreSQL refused the call that waits for it.
@pytest.mark.parametrize("bad", [BAD, chr(0xDC80), chr(0xDFFF)], ids=["both", "low", "last"])
def test_the_calls_that_wait_are_listed_while_such_a_call_waits(
    api: httpx.Client, llm: ScriptedLLM, bad: str
) -> None:
    clean = "".join(REPLACEMENT if c == "\x00" or 0xD800 <= ord(c) < 0xE000 else c for c in bad)
    llm.tool_call(
        "write_file", {"path": f"r{bad}.txt", "content": bad}, text=bad, reasoning=bad
    ).reply(f"Filed {bad}")

    answer = api.post("/api/tasks", json={"prompt": "file it"})

    assert answer.status_code == 200, answer.text
    task = answer.json()
    assert task["status"] == "waiting"
    (call,) = task["pending"]
    assert call["arguments"] == {"path": f"r{clean}.txt", "content": clean}
    listed = api.get("/api/approvals")
    assert listed.status_code == 200, listed.text
    (waiting,) = listed.json()["pending"]
    assert (waiting["id"], waiting["arguments"]) == (call["id"], call["arguments"])

    done = api.post(f"/api/tasks/{task['id']}/approve", json={"call_id": call["id"], "allow": True})

    assert done.status_code == 200, done.text
    assert (done.json()["status"], done.json()["text"]) == ("succeeded", f"Filed {clean}")
    assert api.get("/api/approvals").json()["pending"] == []


def test_a_nul_in_the_reply_and_in_a_commands_output_is_saved(
    api: httpx.Client, llm: ScriptedLLM
) -> None:
    """PostgreSQL stores no NUL in text: on it, this reply was lost with its turn."""
    llm.tool_call("exec", {"command": "printf 'a\\000b'"}).reply("x\x00y")

    answer = api.post("/api/tasks", json={"prompt": "run it", "session": "api:nul"})

    assert answer.status_code == 200, answer.text
    assert (answer.json()["status"], answer.json()["text"]) == ("succeeded", f"x{REPLACEMENT}y")
    listed = api.get("/api/sessions/api:nul/messages").json()
    messages = listed["results"] if isinstance(listed, dict) else listed
    ran, replied = messages[-2:]
    assert ran["role"] == "tool" and f"a{REPLACEMENT}b" in ran["content"]
    assert replied["content"] == f"x{REPLACEMENT}y"


def test_arguments_nested_past_the_interpreters_stack_get_a_plain_answer(
    api: httpx.Client, llm: ScriptedLLM
) -> None:
    """2 KB of brackets: the parser's recursion ran out, and the turn failed with it."""
    deep = "[" * 1500 + "]" * 1500
    llm.tool_call("exec", deep).reply("I will send an object.")

    answer = api.post("/api/tasks", json={"prompt": "run it", "session": "api:deep"})

    assert answer.status_code == 200, answer.text
    assert (answer.json()["status"], answer.json()["text"]) == (
        "succeeded",
        "I will send an object.",
    )
    ran = llm.requests[-1]["messages"][-1]
    assert ran["role"] == "tool" and "nested deeper" in ran["content"]
