"""Open WebUI 0.12 against the door, by the requests it sends (captured on the wire from
Open WebUI 0.12.4, in tests/fixtures/openwebui): its chat message with its 36 built-in
tools, the follow-up after it ran one of them, an image and the messages after it, and its
housekeeping (title, tags, follow-up suggestions), over ten messages of one chat."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.llm_server import ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)

FIXTURES = Path(__file__).parent / "fixtures" / "openwebui"
CHAT_ID = "1170b27a-714f-4779-992f-ae0122dffb70"
# What Open WebUI sends with ENABLE_FORWARD_USER_INFO_HEADERS=true.
FORWARDED = {"X-OpenWebUI-Chat-Id": CHAT_ID, "X-OpenWebUI-User-Name": "Alice Tester"}


def captured(name: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    if body.get("tools") == "builtin_tools.json":
        body["tools"] = json.loads((FIXTURES / "builtin_tools.json").read_text())
    return body


@pytest.fixture
def http(door: str, door_token: str) -> httpx.Client:
    headers = {"Authorization": f"Bearer {door_token}"}
    return httpx.Client(base_url=door, headers=headers, timeout=30)


def listed(http: httpx.Client) -> list[str]:
    token = http.headers["Authorization"].split()[1]
    answer = http.get("/api/sessions", headers={"Authorization": f"Token {token}"})
    return [session["key"] for session in answer.json()]


def stream(http: httpx.Client, body: dict[str, Any], **headers: str) -> dict[str, Any]:
    """What a streamed answer said: its text, its reasoning, its tool calls, its finish."""
    said: dict[str, Any] = {"content": "", "reasoning": "", "tool_calls": [], "finish": None}
    with http.stream("POST", "/v1/chat/completions", json=body, headers=headers) as answer:
        assert answer.status_code == 200, answer.read()
        lines = [line for line in answer.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    for line in lines[:-1]:
        chunk = json.loads(line[6:])
        assert "error" not in chunk, chunk
        for choice in chunk["choices"]:
            delta = choice["delta"]
            said["content"] += delta.get("content") or ""
            said["reasoning"] += delta.get("reasoning_content") or ""
            said["tool_calls"] += delta.get("tool_calls") or []
            said["finish"] = choice["finish_reason"] or said["finish"]
    return said


def task(http: httpx.Client, name: str, **headers: str) -> str:
    answer = http.post("/v1/chat/completions", json=captured(name), headers=headers)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["choices"][0]["message"]["content"])


@pytest.mark.parametrize("door", [{"AGENT_TURN_RATE": "10/min"}], indirect=True)
def test_a_chat_of_ten_messages_with_a_tool_turn_and_housekeeping(
    http: httpx.Client, llm: ScriptedLLM
) -> None:
    # The first message, with its built-in tools: answered, the tools offered beside the
    # agent's own.
    first = captured("chat_with_builtin_tools")
    llm.reply("Hello! How can I help you today?")
    said = stream(http, first, **FORWARDED)
    assert (said["content"], said["finish"]) == ("Hello! How can I help you today?", "stop")
    offered = [tool["function"]["name"] for tool in llm.requests[-1]["tools"]]
    assert len(offered) > 36 and {"get_current_timestamp", "read_file"} <= set(offered)

    # Its housekeeping, sent to the chat's own model as Open WebUI does by default: one
    # model call each, no tools, no agent prompt, not counted as turns, not a chat.
    llm.reply('{ "title": "Greeting" }').reply('{ "tags": ["General"] }')
    llm.reply('{ "follow_ups": ["What time is it?"] }')
    asked = len(llm.requests)
    assert json.loads(task(http, "title", **FORWARDED)) == {"title": "Greeting"}
    assert json.loads(task(http, "tags", **FORWARDED)) == {"tags": ["General"]}
    assert "follow_ups" in task(http, "follow_ups", **FORWARDED)
    for request in llm.requests[asked:]:
        assert "tools" not in request
        assert [m["role"] for m in request["messages"]] == ["user"]
        assert request["messages"][0]["content"].startswith("### Task:")

    # A tool turn: the model calls one of Open WebUI's tools, Open WebUI runs it and sends
    # the result back as it does (`chat_tool_followup`), and the turn goes on.
    followup = captured("chat_tool_followup")
    ask = {**first, "messages": followup["messages"][:3]}
    llm.tool_call("get_current_timestamp", {})
    said = stream(http, ask, **FORWARDED)
    assert said["finish"] == "tool_calls"
    [call] = said["tool_calls"]
    assert call["function"]["name"] == "get_current_timestamp"
    followup["messages"][3]["tool_calls"][0]["id"] = call["id"]
    followup["messages"][4]["tool_call_id"] = call["id"]
    llm.reply("It is 10:21 UTC.")
    said = stream(http, followup, **FORWARDED)
    assert (said["content"], said["finish"]) == ("It is 10:21 UTC.", "stop")
    result = llm.requests[-1]["messages"][-1]
    assert result["role"] == "tool" and "current_timestamp" in result["content"]

    # Messages up to the tenth, each followed by its follow-up suggestions: the turn rate
    # (10 a minute here) counts the chat's turns only.
    history = [*followup["messages"], {"role": "assistant", "content": "It is 10:21 UTC."}]
    for number in range(3, 11):
        history.append({"role": "user", "content": f"Message {number}"})
        llm.reply(f"Answer {number}").reply('{ "follow_ups": [] }')
        said = stream(http, {**first, "messages": history}, **FORWARDED)
        assert said["content"] == f"Answer {number}"
        history.append({"role": "assistant", "content": said["content"]})
        task(http, "follow_ups", **FORWARDED)
    assert listed(http) == [f"openai:{CHAT_ID}"]


@pytest.mark.parametrize("door", [{"AGENT_VISION_MODELS": "openai/scripted"}], indirect=True)
def test_an_image_from_open_webui_reaches_a_model_that_sees(
    http: httpx.Client, llm: ScriptedLLM
) -> None:
    llm.reply("It is a red pixel.").reply("Red, as I said.")
    said = stream(http, captured("chat_with_image"), **FORWARDED)
    assert said["content"] == "It is a red pixel."
    parts = llm.requests[-1]["messages"][-1]["content"]
    assert [part["type"] for part in parts] == ["text", "image_url"]
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")
    said = stream(http, captured("chat_after_image"), **FORWARDED)
    assert said["content"] == "Red, as I said."


def test_a_chat_with_an_image_goes_on_with_a_model_that_cannot_see(
    http: httpx.Client, llm: ScriptedLLM
) -> None:
    """Open WebUI keeps the image in the history of every later message: the image's own
    message is refused in words, and the messages after it are answered."""
    with http.stream(
        "POST", "/v1/chat/completions", json=captured("chat_with_image"), headers=FORWARDED
    ) as answer:
        assert answer.status_code == 400
        error = json.loads(answer.read())["error"]
    assert "cannot take images" in error["message"] and error["param"].endswith("content[2]")
    llm.reply("Happy to help with text.")
    said = stream(http, captured("chat_after_image"), **FORWARDED)
    assert said["content"] == "Happy to help with text."
    seen = llm.requests[-1]["messages"][1]["content"]
    assert [part["type"] for part in seen] == ["text", "text", "text"]
    assert "uploads/" in seen[2]["text"]
