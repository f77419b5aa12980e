"""Real OpenAI clients against the door on a real daphne: the client's own tools as
function calling (streamed and not, beside the agent's own tools), generation parameters
that reach the model, images, and one session per conversation."""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.llm_server import ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city, now.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
# A real 1x1 PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
PNG_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()


@pytest.fixture
def client(door: str, door_token: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{door}/v1", api_key=door_token, max_retries=0)


@pytest.fixture
def http(door: str, door_token: str) -> httpx.Client:
    return httpx.Client(
        base_url=door, headers={"Authorization": f"Bearer {door_token}"}, timeout=30
    )


def api(http: httpx.Client, path: str) -> Any:
    token = http.headers["Authorization"].split()[1]
    answer = http.get(path, headers={"Authorization": f"Token {token}"})
    assert answer.status_code == 200, answer.text
    return answer.json()


def offered(request: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in request.get("tools") or ()]


def streamed_calls(stream: Any) -> tuple[str, list[dict[str, str]], str | None]:
    """The text, the tool calls (assembled from their deltas) and the finish reason."""
    text, calls, finish = [], {}, None
    for chunk in stream:
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        text.append(choice.delta.content or "")
        for part in choice.delta.tool_calls or ():
            call = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
            call["id"] += part.id or ""
            call["name"] += part.function.name or ""
            call["arguments"] += part.function.arguments or ""
        finish = choice.finish_reason or finish
    return "".join(text), [calls[index] for index in sorted(calls)], finish


@pytest.mark.parametrize("model", ["agentsite", "agentsite-plain"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_client_tool_comes_back_as_tool_calls_and_its_result_continues_the_turn(
    client: openai.OpenAI, llm: ScriptedLLM, model: str, stream: bool
) -> None:
    llm.tool_call("get_weather", {"city": "Paris"}).reply("It is sunny in Paris, 21 C.")
    first = client.chat.completions.create(
        model=model,
        messages=ASK,
        tools=[WEATHER],
        stream=stream,  # type: ignore[arg-type]
    )
    if stream:
        _, calls, finish = streamed_calls(first)
    else:
        message = first.choices[0].message  # type: ignore[union-attr]
        finish = first.choices[0].finish_reason  # type: ignore[union-attr]
        calls = [
            {"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
            for c in message.tool_calls or ()
        ]
    assert finish == "tool_calls"
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [
        ("get_weather", {"city": "Paris"})
    ]
    # The model was offered the client's tool: alone for the plain model, beside the
    # agent's own for the agent.
    tools = offered(llm.requests[0])
    assert tools == ["get_weather"] if model == "agentsite-plain" else "read_file" in tools
    assert "get_weather" in tools

    call = calls[0]
    follow_up = [
        *ASK,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": call["name"], "arguments": call["arguments"]},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call["id"], "content": "sunny, 21 C"},
    ]
    second = client.chat.completions.create(
        model=model,
        messages=follow_up,
        tools=[WEATHER],
        stream=stream,  # type: ignore[arg-type]
    )
    if stream:
        text, calls, finish = streamed_calls(second)
    else:
        text = second.choices[0].message.content or ""  # type: ignore[union-attr]
        finish = second.choices[0].finish_reason  # type: ignore[union-attr]
    assert (text.strip(), finish) == ("It is sunny in Paris, 21 C.", "stop")
    results = [m for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in results] == [(call["id"], "sunny, 21 C")]
    assert len(llm.requests) == 2


def test_the_agents_own_tools_run_on_the_server_in_the_same_turn(
    client: openai.OpenAI, llm: ScriptedLLM, workspace: Path, http: httpx.Client
) -> None:
    """The agent reads a file itself, then asks the client's tool; the client's result
    continues the turn, which still holds the file it read (the client never saw it)."""
    llm.tool_call("write_file", {"path": "city.txt", "content": "Paris"})
    llm.tool_call("get_weather", {"city": "Paris"}, text="Checking the weather.")
    llm.reply("Paris: sunny.")
    first = client.chat.completions.create(model="agentsite", messages=ASK, tools=[WEATHER])  # type: ignore[arg-type]
    message = first.choices[0].message
    assert first.choices[0].finish_reason == "tool_calls"
    assert message.content == "Checking the weather."
    assert [c.function.name for c in message.tool_calls or ()] == ["get_weather"]
    assert any((workspace / "users").glob("*/city.txt"))

    follow_up = [
        *ASK,
        message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": "sunny"},  # type: ignore[index]
    ]
    second = client.chat.completions.create(model="agentsite", messages=follow_up, tools=[WEATHER])  # type: ignore[arg-type]
    assert second.choices[0].message.content == "Paris: sunny."
    sent = llm.requests[2]["messages"]
    assert [m["role"] for m in sent[1:]] == ["user", "assistant", "tool", "assistant", "tool"]
    assert "write_file" in json.dumps(sent[2]) and sent[-1]["content"] == "sunny"
    # One conversation, one session, whose record holds the whole turn.
    keys = [s["key"] for s in api(http, "/api/sessions")]
    assert len(keys) == 1 and keys[0].startswith("openai:")


def test_a_client_tool_named_as_one_of_the_agents_is_refused_and_tool_choice_holds(
    client: openai.OpenAI, llm: ScriptedLLM
) -> None:
    clash = {"type": "function", "function": {"name": "exec", "parameters": {"type": "object"}}}
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="agentsite", messages=ASK, tools=[clash])  # type: ignore[arg-type, list-item]
    assert refused.value.param == "tools[0]" and "exec" in refused.value.message
    # The plain model offers the client's tools alone: no clash there.
    llm.tool_call("exec", {}).reply("done")
    answer = client.chat.completions.create(
        model="agentsite-plain",
        messages=ASK,  # type: ignore[arg-type]
        tools=[clash],  # type: ignore[list-item]
        tool_choice={"type": "function", "function": {"name": "exec"}},
        parallel_tool_calls=False,
    )
    assert answer.choices[0].finish_reason == "tool_calls"
    sent = llm.requests[0]
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "exec"}}
    assert sent["parallel_tool_calls"] is False


def test_generation_parameters_reach_the_model(client: openai.OpenAI, llm: ScriptedLLM) -> None:
    llm.reply('{"city": "Paris"}')
    schema = {
        "type": "json_schema",
        "json_schema": {
            "name": "place",
            "schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
    answer = client.chat.completions.create(
        model="agentsite",
        messages=ASK,  # type: ignore[arg-type]
        stop=["\n\n", "END"],
        seed=7,
        top_p=0.5,
        presence_penalty=0.25,
        frequency_penalty=0,
        response_format=schema,  # type: ignore[arg-type]
    )
    assert json.loads(answer.choices[0].message.content or "") == {"city": "Paris"}
    sent = llm.requests[0]
    assert sent["stop"] == ["\n\n", "END"] and sent["seed"] == 7 and sent["top_p"] == 0.5
    assert sent["presence_penalty"] == 0.25 and sent["frequency_penalty"] == 0
    assert sent["response_format"] == schema

    # `tool_choice` holds for the turn's first model call, not for those after it: a forced
    # tool would be called forever.
    llm.tool_call("list_dir", {"path": "."}).reply("Empty.")
    client.chat.completions.create(
        model="agentsite",
        messages=ASK,
        tool_choice="required",
        seed=3,  # type: ignore[arg-type]
    )
    assert [r["tool_choice"] for r in llm.requests[1:]] == ["required", "auto"]
    assert [r["seed"] for r in llm.requests[1:]] == [3, 3]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_log_probabilities_come_back_when_asked_for(
    client: openai.OpenAI, llm: ScriptedLLM, stream: bool
) -> None:
    llm.reply("One two three.", chunks=3)
    answer = client.chat.completions.create(
        model="agentsite-plain",
        messages=ASK,
        logprobs=True,
        top_logprobs=2,
        stream=stream,  # type: ignore[arg-type]
    )
    if stream:
        chunks = [chunk for chunk in answer if chunk.choices]  # type: ignore[union-attr]
        tokens = [
            t for c in chunks if c.choices[0].logprobs for t in c.choices[0].logprobs.content or ()
        ]
    else:
        tokens = answer.choices[0].logprobs.content or []  # type: ignore[union-attr]
    assert "".join(token.token for token in tokens) == "One two three."
    assert {token.logprob for token in tokens} == {-0.25}
    assert llm.requests[0]["logprobs"] is True and llm.requests[0]["top_logprobs"] == 2


@pytest.mark.parametrize("door", [{"AGENT_VISION_MODELS": "openai/scripted"}], indirect=True)
def test_an_image_reaches_a_model_that_sees_and_is_kept_in_the_users_folder(
    client: openai.OpenAI, llm: ScriptedLLM, workspace: Path
) -> None:
    llm.reply("A single pixel.").reply("Yes, one pixel.")
    look = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": PNG_URL, "detail": "low"}},
            ],
        }
    ]
    answer = client.chat.completions.create(model="agentsite", messages=look)  # type: ignore[arg-type]
    assert answer.choices[0].message.content == "A single pixel."
    parts = llm.requests[0]["messages"][-1]["content"]
    assert parts[0]["type"] == "text" and parts[0]["text"].endswith("What is this?")
    assert parts[1] == {"type": "image_url", "image_url": {"url": PNG_URL, "detail": "low"}}
    kept = list((workspace / "users").glob("*/uploads/*.png"))
    assert [path.read_bytes() for path in kept] == [PNG]

    # The image stays in the history the client sends; the model sees it there too, and
    # it is kept once.
    again = [*look, {"role": "assistant", "content": "A single pixel."}]
    again.append({"role": "user", "content": "Only one?"})
    client.chat.completions.create(model="agentsite", messages=again)  # type: ignore[arg-type]
    history = llm.requests[1]["messages"]
    assert any(
        isinstance(m["content"], list) and m["content"][1]["type"] == "image_url" for m in history
    )
    assert len(list((workspace / "users").glob("*/uploads/*.png"))) == 1


def test_a_model_that_cannot_see_refuses_the_image_and_the_chat_goes_on(
    client: openai.OpenAI, llm: ScriptedLLM, http: httpx.Client
) -> None:
    look = {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": PNG_URL}},
        ],
    }
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="agentsite", messages=[look])  # type: ignore[list-item]
    assert refused.value.param == "messages[0].content[1]"
    assert "cannot take images" in refused.value.message
    assert llm.requests == [] and api(http, "/api/sessions") == []

    # The client keeps the image in its history (Open WebUI does): a text message after it
    # is answered, the image named in words to the model.
    llm.reply("I cannot see images, but go on.")
    later = [look, {"role": "user", "content": "Then tell me a joke."}]
    answer = client.chat.completions.create(model="agentsite", messages=later)  # type: ignore[arg-type]
    assert answer.choices[0].message.content == "I cannot see images, but go on."
    shown = llm.requests[0]["messages"][1]["content"]
    assert shown[0]["text"] == "What is this?"
    assert shown[1]["type"] == "text" and "uploads/" in shown[1]["text"]


def test_an_image_url_goes_through_the_address_guard(
    client: openai.OpenAI, llm: ScriptedLLM
) -> None:
    inner = {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": f"{llm.base_url}/secret.png"}},
        ],
    }
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="agentsite", messages=[inner])  # type: ignore[list-item]
    assert refused.value.param == "messages[0].content[1]"
    assert llm.requests == []


@pytest.fixture
def picture_server() -> Any:
    """A web server on 127.0.0.1 with a PNG at /pixel.png and a page at /page.html."""

    class Pictures(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body, kind = (PNG, "image/png") if self.path == "/pixel.png" else (b"<p>", "text/html")
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Pictures)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


VISION_AND_LOOPBACK = {"AGENT_VISION_MODELS": "openai/scripted", "AGENT_WEB_ALLOW_PRIVATE": "true"}


@pytest.mark.parametrize("door", [VISION_AND_LOOPBACK], indirect=True)
def test_an_image_url_is_fetched_and_kept_where_the_guard_allows(
    client: openai.OpenAI, llm: ScriptedLLM, picture_server: str, workspace: Path
) -> None:
    llm.reply("A pixel from the web.")

    def look(url: str) -> list[Any]:
        parts = [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": url}}]
        return [{"role": "user", "content": parts}]

    answer = client.chat.completions.create(
        model="agentsite", messages=look(f"{picture_server}/pixel.png")
    )  # type: ignore[arg-type]
    assert answer.choices[0].message.content == "A pixel from the web."
    assert llm.requests[0]["messages"][-1]["content"][1]["image_url"]["url"] == PNG_URL
    assert [p.read_bytes() for p in (workspace / "users").glob("*/uploads/*.png")] == [PNG]
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(
            model="agentsite", messages=look(f"{picture_server}/page.html")
        )  # type: ignore[arg-type]
    assert "not an image" in refused.value.message


def test_one_conversation_is_one_session(
    client: openai.OpenAI, llm: ScriptedLLM, http: httpx.Client
) -> None:
    """Without `user` or a header, the same earlier messages continue the same session:
    a conversation of three messages, one regenerated, is one chat; another is another."""
    llm.reply("Hello!").reply("Fine, thanks.").reply("Fine, and you?").reply("Hi there.")
    chat: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
    chat.append({"role": "user", "content": "Hi"})
    hello = client.chat.completions.create(model="agentsite", messages=chat, stream=True)  # type: ignore[arg-type]
    chat.append(
        {
            "role": "assistant",
            "content": "".join(c.choices[0].delta.content or "" for c in hello if c.choices),
        }
    )
    chat.append({"role": "user", "content": "How are you?"})
    client.chat.completions.create(model="agentsite", messages=chat)  # type: ignore[arg-type]
    # Regenerated in the client: the same messages again.
    client.chat.completions.create(model="agentsite", messages=chat)  # type: ignore[arg-type]
    client.chat.completions.create(model="agentsite", messages=[{"role": "user", "content": "Hi"}])  # type: ignore[list-item]
    listed = api(http, "/api/sessions")
    assert len(listed) == 2
    runs = {s["key"]: len(api(http, f"/api/sessions/{s['key']}/messages")) for s in listed}
    assert sorted(runs.values()) == [2, 6]


def test_open_webui_names_its_chat_and_direct_generations_stay_off_the_list(
    http: httpx.Client, llm: ScriptedLLM
) -> None:
    llm.reply("One.").reply("Two.").reply("Weather Chat")
    for text in ("first", "second"):
        answer = http.post(
            "/v1/chat/completions",
            json={"model": "agentsite", "messages": [{"role": "user", "content": text}]},
            headers={"X-OpenWebUI-Chat-Id": "2b1f7c1e-5d1a-4d0e-9a55-0c6d3a1c9e11"},
        )
        assert answer.status_code == 200, answer.text
    title = http.post(
        "/v1/chat/completions",
        json={"model": "agentsite-plain", "messages": [{"role": "user", "content": "title?"}]},
        headers={"X-OpenWebUI-Chat-Id": "2b1f7c1e-5d1a-4d0e-9a55-0c6d3a1c9e11"},
    )
    assert title.json()["choices"][0]["message"]["content"] == "Weather Chat"
    assert title.headers["X-Session-Key"].startswith("openai-direct:")
    assert [s["key"] for s in api(http, "/api/sessions")] == [
        "openai:2b1f7c1e-5d1a-4d0e-9a55-0c6d3a1c9e11"
    ]
