"""The OpenAI-compatible door with real clients against a real daphne: the `openai` SDK (sync
and async, streamed and not) and litellm use the agent as a model, tools and all, and the
scripted model behind it sees what each model id promises."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.conftest import LOGIN, folder_of, login_token
from tests.llm_server import ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def token(live_site: str, site_env: dict[str, str]) -> str:
    return login_token(site_env)


@pytest.fixture
def client(live_site: str, token: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{live_site}/v1", api_key=token, max_retries=0, timeout=30)


def tool_names(request: dict[str, Any]) -> list[str]:
    return sorted(tool["function"]["name"] for tool in request.get("tools") or [])


def stored(live_site: str, token: str, key: str) -> list[dict[str, Any]]:
    """The messages of session `key`, as the task API shows them."""
    headers = {"Authorization": f"Token {token}"}
    answer = httpx.get(f"{live_site}/api/sessions/{key}/messages", headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    return body["results"] if isinstance(body, dict) else body


def test_the_sdk_lists_the_agent_and_the_plain_model(client: openai.OpenAI) -> None:
    ids = [model.id for model in client.models.list()]
    assert ids == ["agentsite", "agentsite-plain"]
    assert client.models.retrieve("agentsite-plain").owned_by == "agentsite"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-4o")


def test_a_tool_turn_answers_with_its_final_text_and_its_steps_as_reasoning(
    client: openai.OpenAI, llm: ScriptedLLM, workspace: Path, live_site: str, token: str
) -> None:
    llm.tool_call("write_file", {"path": "notes.txt", "content": "from the door"})
    llm.reply("Wrote notes.txt.")
    answer = client.chat.completions.create(
        model="agentsite", messages=[{"role": "user", "content": "write notes.txt"}]
    )

    assert answer.id.startswith("chatcmpl-") and answer.object == "chat.completion"
    assert answer.model == "agentsite" and answer.created > 0
    (choice,) = answer.choices
    assert choice.index == 0 and choice.finish_reason == "stop"
    assert choice.message.role == "assistant" and choice.message.content == "Wrote notes.txt."
    reasoning = (choice.message.model_extra or {})["reasoning_content"]
    assert "write_file" in reasoning and "notes.txt" in reasoning
    assert answer.usage is not None and answer.usage.total_tokens > 0
    assert answer.usage.total_tokens == answer.usage.prompt_tokens + answer.usage.completion_tokens
    assert (folder_of(workspace, LOGIN[0]) / "notes.txt").read_text() == "from the door"
    assert tool_names(llm.requests[0])  # the agent's tools were offered
    # No session named: the turn is one of its own, kept under the completion's id.
    messages = stored(live_site, token, f"openai:{answer.id}")
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]


def test_a_stream_sends_chunks_reasoning_and_usage_then_done(
    client: openai.OpenAI, llm: ScriptedLLM
) -> None:
    llm.tool_call("list_dir", {"path": "."})
    llm.reply("All listed, nothing here.", chunks=5, chunk_delay=0.05)
    stream = client.chat.completions.create(
        model="agentsite",
        messages=[{"role": "user", "content": "list it"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)

    assert {chunk.object for chunk in chunks} == {"chat.completion.chunk"}
    assert len({chunk.id for chunk in chunks}) == 1 and chunks[0].id.startswith("chatcmpl-")
    assert chunks[0].choices[0].delta.role == "assistant"
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == "All listed, nothing here."
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) == 5
    reasoning = "".join(
        (c.choices[0].delta.model_extra or {}).get("reasoning_content") or ""
        for c in chunks
        if c.choices
    )
    assert "→ list_dir" in reasoning and "← list_dir" in reasoning
    *body, finish, last = chunks
    assert finish.choices[0].finish_reason == "stop"
    assert all(c.usage is None for c in [*body, finish])
    assert last.choices == [] and last.usage is not None and last.usage.total_tokens > 0


def test_the_async_sdk_streams_and_waits(live_site: str, token: str, llm: ScriptedLLM) -> None:
    llm.reply("streamed").reply("waited")

    async def talk() -> tuple[str, str]:
        async with openai.AsyncOpenAI(
            base_url=f"{live_site}/v1", api_key=token, max_retries=0
        ) as aclient:
            stream = await aclient.chat.completions.create(
                model="agentsite",
                messages=[{"role": "user", "content": "a"}],
                stream=True,
                stream_options={"include_usage": True},
            )
            parts, usage = [], None
            async for chunk in stream:
                parts.extend(c.delta.content or "" for c in chunk.choices)
                usage = chunk.usage or usage
            assert usage is not None and usage.total_tokens > 0
            whole = await aclient.chat.completions.create(
                model="agentsite", messages=[{"role": "user", "content": "b"}]
            )
            return "".join(parts), whole.choices[0].message.content or ""

    assert asyncio.run(talk()) == ("streamed", "waited")


def test_the_plain_model_is_one_generation_without_tools(
    client: openai.OpenAI, llm: ScriptedLLM
) -> None:
    llm.reply("A plain answer.")
    messages: list[Any] = [
        {"role": "system", "content": "Answer in one line."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": [{"type": "text", "text": "and now?"}]},
    ]
    answer = client.chat.completions.create(
        model="agentsite-plain", messages=messages, temperature=0.7, max_tokens=50
    )

    assert answer.choices[0].message.content == "A plain answer."
    (sent,) = llm.requests
    assert "tools" not in sent
    assert sent["messages"] == [
        {"role": "system", "content": "Answer in one line."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "and now?"},
    ]
    assert sent["temperature"] == 0.7 and sent["max_tokens"] == 50


def test_the_agent_sees_the_clients_conversation_and_instructions(
    client: openai.OpenAI, llm: ScriptedLLM, live_site: str, token: str
) -> None:
    llm.reply("first").reply("second")
    client.chat.completions.create(
        model="agentsite", messages=[{"role": "user", "content": "one"}], user="alice"
    )
    client.chat.completions.create(
        model="agentsite",
        messages=[
            {"role": "developer", "content": "Speak like a pirate."},
            {"role": "user", "content": "zero"},
            {"role": "assistant", "content": "a different past"},
            {"role": "user", "content": "two"},
        ],
        extra_headers={"X-Session-Key": "pirates"},
    )
    sent = llm.requests[1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert "## Instructions from the client\n\nSpeak like a pirate." in sent[0]["content"]
    assert sent[1]["content"] == "zero" and sent[2]["content"] == "a different past"
    assert sent[3]["content"].endswith("two")
    # Each landed in its session, which the user's session list shows.
    headers = {"Authorization": f"Token {token}"}
    sessions = httpx.get(f"{live_site}/api/sessions", headers=headers).json()
    assert {"openai:alice", "openai:pirates"} <= {s["key"] for s in sessions}
    assert [m["content"] for m in stored(live_site, token, "openai:alice")] == ["one", "first"]


def test_a_wrong_or_missing_key_is_refused(live_site: str, llm: ScriptedLLM) -> None:
    wrong = openai.OpenAI(base_url=f"{live_site}/v1", api_key="nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as refused:
        wrong.chat.completions.create(
            model="agentsite", messages=[{"role": "user", "content": "hi"}]
        )
    assert refused.value.code == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        wrong.models.list()
    bare = httpx.post(f"{live_site}/v1/chat/completions", json={"model": "agentsite"})
    assert bare.status_code == 401
    assert bare.json()["error"]["type"] == "invalid_request_error"
    assert bare.json()["error"]["code"] == "invalid_api_key"
    assert llm.requests == []


def test_litellm_uses_the_door_as_an_openai_model(
    live_site: str, token: str, llm: ScriptedLLM
) -> None:
    import litellm

    llm.tool_call("list_dir", {"path": "."}).reply("Through litellm.")
    llm.reply("Streamed through litellm.")
    base = {"model": "openai/agentsite", "api_base": f"{live_site}/v1", "api_key": token}
    answer = litellm.completion(**base, messages=[{"role": "user", "content": "go"}])
    assert answer.choices[0].message.content == "Through litellm."

    stream = litellm.completion(**base, messages=[{"role": "user", "content": "go"}], stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream) == "Streamed through litellm."
    assert [len(tool_names(r)) > 0 for r in llm.requests] == [True, True, True]
    assert json.dumps(llm.requests[0]).count("list_dir") >= 1
