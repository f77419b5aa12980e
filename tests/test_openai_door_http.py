"""The OpenAI-compatible door over raw HTTP on a real daphne: bad input in OpenAI's error
shape with nothing saved, a stream that leaves chunk by chunk, a client that hangs up
mid-stream, the turn rate, the allowed models, and a turn that fails."""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

import httpx
import openai
import pytest

from tests.conftest import LOGIN, login_token, manage
from tests.llm_server import ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)

USER = [{"role": "user", "content": "hi"}]
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}
AUDIO = {"type": "input_audio", "input_audio": {"data": "AA==", "format": "wav"}}
CALL = {"id": "c", "function": {"name": 1}}
# fmt: off
CASES: list[tuple[Any, int, str | None, str | None]] = [
    # body, status, param, code
    ({"messages": USER}, 400, "model", "missing_required_parameter"),
    ({"model": 5, "messages": USER}, 400, "model", "invalid_type"),
    ({"model": "gpt-4o", "messages": USER}, 404, None, "model_not_found"),
    ({"model": "agentsite:openai/other", "messages": USER}, 404, None, "model_not_found"),
    ({"model": "agentsite"}, 400, "messages", "missing_required_parameter"),
    ({"model": "agentsite", "messages": []}, 400, "messages", "empty_array"),
    ({"model": "agentsite", "messages": "hi"}, 400, "messages", "invalid_type"),
    ({"model": "agentsite", "messages": ["hi"]}, 400, "messages[0]", "invalid_type"),
    ({"model": "agentsite", "messages": [{"content": "x"}]}, 400, "messages[0].role", "missing_required_parameter"),
    ({"model": "agentsite", "messages": [{"role": "wizard", "content": "x"}]}, 400, "messages[0].role", "invalid_value"),
    ({"model": "agentsite", "messages": [{"role": "function", "content": "x", "name": "f"}]}, 400, "messages[0].role", "invalid_value"),
    ({"model": "agentsite", "messages": [{"role": "user", "content": 5}]}, 400, "messages[0].content", "invalid_type"),
    ({"model": "agentsite", "messages": [{"role": "user"}]}, 400, "messages[0].content", "missing_required_parameter"),
    ({"model": "agentsite", "messages": [{"role": "user", "content": "   "}]}, 400, "messages[0].content", "invalid_value"),
    ({"model": "agentsite", "messages": [*USER, {"role": "assistant", "content": "x"}]}, 400, "messages[1].role", "invalid_value"),
    # The test's model takes no images nor audio: the part is named.
    ({"model": "agentsite", "messages": [{"role": "user", "content": [{"type": "text", "text": "look"}, IMAGE]}]}, 400, "messages[0].content[1]", "invalid_value"),
    ({"model": "agentsite-plain", "messages": [{"role": "user", "content": [AUDIO]}]}, 400, "messages[0].content[0]", "invalid_value"),
    ({"model": "agentsite", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "file:///etc/passwd"}}]}]}, 400, "messages[0].content[0].image_url.url", "invalid_value"),
    ({"model": "agentsite", "messages": [{"role": "user", "content": [{"type": "file", "file": {"file_id": "file-1"}}]}]}, 400, "messages[0].content[0].file.file_id", "unsupported_value"),
    ({"model": "agentsite", "messages": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, 400, "messages[0].content[0].type", "unsupported_value"),
    ({"model": "agentsite", "messages": [*USER, {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": "{}"}}]}]}, 400, "messages[1].role", "invalid_value"),
    ({"model": "agentsite", "messages": [{"role": "user", "content": [{"type": "text", "text": 3}]}]}, 400, "messages[0].content[0].text", "invalid_type"),
    ({"model": "agentsite", "messages": [{"role": "tool", "content": "r"}, *USER]}, 400, "messages[0].tool_call_id", "missing_required_parameter"),
    ({"model": "agentsite", "messages": [{"role": "assistant", "content": None, "tool_calls": [CALL]}, *USER]}, 400, "messages[0].tool_calls[0].function.name", "invalid_type"),
    ({"model": "agentsite", "messages": USER, "n": 2}, 400, "n", "unsupported_value"),
    ({"model": "agentsite", "messages": USER, "n": 0}, 400, "n", "invalid_value"),
    ({"model": "agentsite", "messages": USER, "n": "1"}, 400, "n", "invalid_type"),
    ({"model": "agentsite", "messages": USER, "modalities": ["text", "audio"]}, 400, "modalities", "unsupported_value"),
    ({"model": "agentsite", "messages": USER, "tools": [{"type": "web_search"}]}, 400, "tools[0].type", "unsupported_value"),
    ({"model": "agentsite", "messages": USER, "tools": [{"type": "function", "function": {"name": "has space"}}]}, 400, "tools[0].function.name", "invalid_value"),
    ({"model": "agentsite", "messages": USER, "tools": [{"type": "function", "function": {"name": "f"}}] * 2}, 400, "tools[1].function.name", "invalid_value"),
    ({"model": "agentsite", "messages": USER, "tools": [{"type": "function", "function": {"name": "read_file"}}]}, 400, "tools[0]", "invalid_value"),
    ({"model": "agentsite", "messages": USER, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, 400, "tool_choice.function.name", "invalid_value"),
    ({"model": "agentsite", "messages": USER, "tool_choice": "sometimes"}, 400, "tool_choice", "invalid_value"),
    ({"model": "agentsite", "messages": USER, "response_format": {"type": "yaml"}}, 400, "response_format.type", "invalid_value"),
    ({"model": "agentsite", "messages": USER, "response_format": {"type": "json_schema"}}, 400, "response_format.json_schema", "invalid_type"),
    ({"model": "agentsite", "messages": USER, "top_logprobs": 2}, 400, "top_logprobs", "invalid_value"),
    ({"model": "agentsite", "messages": USER, "stop": ["a", "b", "c", "d", "e"]}, 400, "stop", "invalid_value"),
    ({"model": "agentsite", "messages": USER, "stop": ["a", 1]}, 400, "stop[1]", "invalid_type"),
    ({"model": "agentsite", "messages": USER, "stream": "yes"}, 400, "stream", "invalid_type"),
    ({"model": "agentsite", "messages": USER, "stream_options": {"include_usage": True}}, 400, "stream_options", "invalid_value"),
    ({"model": "agentsite", "messages": USER, "stream": True, "stream_options": {"include_usage": "y"}}, 400, "stream_options.include_usage", "invalid_type"),
    ({"model": "agentsite", "messages": USER, "stream_options": []}, 400, "stream_options", "invalid_type"),
    ({"model": "agentsite", "messages": USER, "temperature": "hot"}, 400, "temperature", "invalid_type"),
    ({"model": "agentsite", "messages": USER, "temperature": True}, 400, "temperature", "invalid_type"),
    ({"model": "agentsite", "messages": USER, "temperature": 3}, 400, "temperature", "invalid_value"),
    ({"model": "agentsite", "messages": USER, "top_p": [1]}, 400, "top_p", "invalid_type"),
    ({"model": "agentsite", "messages": USER, "max_tokens": 1.5}, 400, "max_tokens", "invalid_type"),
    ({"model": "agentsite", "messages": USER, "max_completion_tokens": 0}, 400, "max_completion_tokens", "invalid_value"),
    ({"model": "agentsite", "messages": USER, "user": 42}, 400, "user", "invalid_type"),
    ({"model": "agentsite", "messages": USER, "user": "has space"}, 400, "user", "invalid_value"),
    ({"model": "agentsite", "messages": USER, "stop": 1}, 400, "stop", "invalid_type"),
    ({"model": "agentsite", "messages": USER, "seed": "s"}, 400, "seed", "invalid_type"),
    ({"model": "agentsite", "messages": USER, "metadata": "m"}, 400, "metadata", "invalid_type"),
    (["not", "an", "object"], 400, None, None),
]
# fmt: on


@pytest.fixture
def door(site_env: dict[str, str], request: pytest.FixtureRequest) -> str:
    """The site on a real daphne, with the environment of the test's parameter."""
    site_env.update(getattr(request, "param", {}))
    return str(request.getfixturevalue("live_site"))


@pytest.fixture
def token(door: str, site_env: dict[str, str]) -> str:
    return login_token(site_env)


@pytest.fixture
def http(door: str, token: str) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.Client(base_url=door, headers=headers, timeout=30)


def error_of(answer: httpx.Response) -> dict[str, Any]:
    body = answer.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["message"]
    return dict(body["error"])


def api(http: httpx.Client, path: str) -> Any:
    """A task API answer, with the same token as the API takes it."""
    token = http.headers["Authorization"].split()[1]
    answer = http.get(path, headers={"Authorization": f"Token {token}"})
    assert answer.status_code == 200, answer.text
    return answer.json()


def sessions(http: httpx.Client) -> list[str]:
    return [s["key"] for s in api(http, "/api/sessions")]


def test_bad_input_is_an_openai_error_naming_the_parameter_and_saves_nothing(
    http: httpx.Client, door: str, llm: ScriptedLLM
) -> None:
    wrong = []
    for body, status, param, code in CASES:
        answer = http.post("/v1/chat/completions", json=body)
        error = error_of(answer)
        seen = (answer.status_code, error["param"], error["code"])
        if seen != (status, param, code) or error["type"] != "invalid_request_error":
            wrong.append((body, seen, error))
    assert wrong == []

    def post(content: bytes) -> httpx.Response:
        return http.post("/v1/chat/completions", content=content)

    assert post(b"{not json").status_code == 400 and error_of(post(b"{not json"))["code"] is None
    surrogate = b'{"model": "agentsite", "messages": [{"role": "user", "content": "a\\ud800"}]}'
    assert error_of(post(surrogate))["param"] == "messages[0].content"
    # Twice AGENT_MAX_UPLOAD_BYTES (20 MB): room for a chat's images, inside the JSON.
    too_big = json.dumps({"model": "agentsite", "messages": USER, "pad": "x" * 42_000_000})
    answer = post(too_big.encode())
    assert answer.status_code == 413 and error_of(answer)["code"] == "request_too_large"
    answer = http.get("/v1/chat/completions")
    assert answer.status_code == 405 and error_of(answer)["code"] == "method_not_allowed"
    answer = http.post("/v1/completions", json={})
    assert answer.status_code == 404 and error_of(answer)["message"].startswith("Invalid URL")
    answer = httpx.post(f"{door}/v1/chat/completions", json={"model": "agentsite"})
    assert answer.status_code == 401 and error_of(answer)["code"] == "invalid_api_key"

    assert llm.requests == [] and sessions(http) == []


def test_a_stream_leaves_chunk_by_chunk_as_the_model_writes(
    http: httpx.Client, llm: ScriptedLLM
) -> None:
    llm.reply("one two three four five!", chunks=5, chunk_delay=0.3)
    body = {"model": "agentsite", "messages": USER, "stream": True}
    lines: list[str] = []
    arrivals: list[tuple[float, str]] = []
    with http.stream("POST", "/v1/chat/completions", json=body) as answer:
        assert answer.headers["content-type"].startswith("text/event-stream")
        for line in answer.iter_lines():
            if line:
                lines.append(line)
            if line.startswith("data: {"):
                delta = json.loads(line[6:])["choices"][0]["delta"]
                if delta.get("content"):
                    arrivals.append((time.monotonic(), delta["content"]))
    assert lines[-1] == "data: [DONE]"
    assert "".join(text for _, text in arrivals) == "one two three four five!"
    assert len(arrivals) == 5
    gaps = [later - earlier for (earlier, _), (later, _) in itertools.pairwise(arrivals)]
    assert min(gaps) > 0.15, gaps  # each chunk left when the model wrote it, not at the end


def test_a_client_that_hangs_up_mid_stream_leaves_a_turn_that_finishes_and_is_saved(
    http: httpx.Client, llm: ScriptedLLM
) -> None:
    llm.reply("the whole answer, saved", chunks=6, chunk_delay=0.3)
    body = {"model": "agentsite", "messages": USER, "stream": True, "user": "leaver"}
    with http.stream("POST", "/v1/chat/completions", json=body) as answer:
        for line in answer.iter_lines():
            if '"content": "the' in line:
                break  # the first words came: hang up
    deadline = time.monotonic() + 20
    while True:
        messages = api(http, "/api/sessions/openai:leaver/messages")
        if [m["role"] for m in messages] == ["user", "assistant"]:
            break
        assert time.monotonic() < deadline, messages
        time.sleep(0.2)
    assert messages[1]["content"] == "the whole answer, saved"


@pytest.mark.parametrize("door", [{"AGENT_TURN_RATE": "1/min"}], indirect=True)
def test_the_turn_rate_holds_at_this_door_too(
    http: httpx.Client, token: str, door: str, llm: ScriptedLLM
) -> None:
    client = openai.OpenAI(base_url=f"{door}/v1", api_key=token, max_retries=0)
    client.chat.completions.create(model="agentsite", messages=USER)  # type: ignore[arg-type]
    with pytest.raises(openai.RateLimitError) as refused:
        client.chat.completions.create(model="agentsite", messages=USER)  # type: ignore[arg-type]
    assert refused.value.code == "rate_limit_exceeded"
    assert int(refused.value.response.headers["Retry-After"]) > 0
    # A slash command costs no model call and is not counted.
    help_ = client.chat.completions.create(
        model="agentsite",
        messages=[{"role": "user", "content": "/help"}],
        user="helped",
    )
    assert "/new" in (help_.choices[0].message.content or "")
    assert len(llm.requests) == 1


@pytest.mark.parametrize("door", [{"AGENT_MODELS": "openai/other,openai/third"}], indirect=True)
def test_the_allowed_models_can_be_pinned_and_no_other(
    http: httpx.Client, llm: ScriptedLLM
) -> None:
    ids = [model["id"] for model in http.get("/v1/models").json()["data"]]
    assert ids[:2] == ["agentsite", "agentsite-plain"]
    assert "agentsite:openai/other" in ids and "agentsite-plain:openai/third" in ids
    assert http.get("/v1/models/agentsite:openai/other").json()["id"] == "agentsite:openai/other"

    llm.reply("from other")
    body = {"model": "agentsite-plain:openai/other", "messages": USER}
    answer = http.post("/v1/chat/completions", json=body).json()
    assert answer["model"] == "agentsite-plain:openai/other"
    assert llm.requests[0]["model"] == "other"
    refused = http.post("/v1/chat/completions", json={**body, "model": "agentsite:openai/nope"})
    assert refused.status_code == 404 and error_of(refused)["code"] == "model_not_found"


def test_a_turn_that_fails_is_an_error_the_client_is_told_not_to_retry(
    http: httpx.Client, token: str, door: str, llm: ScriptedLLM
) -> None:
    llm.fault(400, body={"error": {"message": "no such thing", "type": "invalid_request_error"}})
    answer = http.post("/v1/chat/completions", json={"model": "agentsite", "messages": USER})
    assert answer.status_code == 502 and answer.headers["x-should-retry"] == "false"
    assert error_of(answer)["type"] == "server_error"

    llm.fault(400, body={"error": {"message": "no such thing", "type": "invalid_request_error"}})
    client = openai.OpenAI(base_url=f"{door}/v1", api_key=token, max_retries=0)
    stream = client.chat.completions.create(model="agentsite", messages=USER, stream=True)  # type: ignore[arg-type]
    with pytest.raises(openai.APIError, match="rejected"):
        list(stream)


SPENT = {
    "AGENT_USER_DAILY_BUDGET": "1",
    "AGENT_MODEL_PRICES": json.dumps({"openai/scripted": {"input": 1, "output": 1}}),
}


@pytest.mark.parametrize("door", [SPENT], indirect=True)
def test_a_spent_daily_budget_is_a_spent_quota_here_too(
    http: httpx.Client, token: str, door: str, llm: ScriptedLLM, site_env: dict[str, str]
) -> None:
    spend = (
        "from decimal import Decimal\n"
        "from django.contrib.auth.models import User\n"
        "from sessions_app.usage import add_usage\n"
        f"owner = User.objects.get(username={LOGIN[0]!r})\n"
        "add_usage(owner_id=owner.pk, model='openai/scripted', usage={}, cost=Decimal('1.5'))\n"
    )
    manage(site_env, "shell", "-c", spend)
    client = openai.OpenAI(base_url=f"{door}/v1", api_key=token, max_retries=0)
    with pytest.raises(openai.RateLimitError) as refused:
        client.chat.completions.create(model="agentsite", messages=USER, user="spent")  # type: ignore[arg-type]
    assert refused.value.code == "insufficient_quota"
    assert "budget" in refused.value.message
    assert int(refused.value.response.headers["Retry-After"]) > 0
    assert refused.value.response.headers["x-should-retry"] == "false"
    assert llm.requests == [] and "openai:spent" not in sessions(http)
