"""What a provider says when it fails never reaches a person: through every door of a real
site (the task API, the OpenAI door, the chat socket) a failed model call is a fixed sentence
for its kind, whatever words, addresses or passwords the provider's error carried."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from tests.conftest import login_token
from tests.llm_server import ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)

# What a provider behind a misconfigured proxy has answered with.
LEAK = "postgres://admin:hunter2@10.1.2.3:5432/prod is down"
SECRETS = ("hunter2", "10.1.2.3", "postgres://", "prod is down")

REJECTED = (
    "The model provider rejected the request (HTTP 400). Try another model, or ask the "
    "site's operator: the server's log has the details."
)
REFUSED_KEY = (
    "The model provider did not accept the site's credentials. Ask the site's operator to "
    "check the model's API key (AGENT_API_KEY)."
)
SERVER_FAILED = "The model server failed (HTTP 503). Try again in a moment."

# status → (the run's `error`, what the person reads)
FAULTS = {
    400: ("the model provider rejected the request (HTTP 400)", REJECTED),
    401: ("the model provider did not accept the site's credentials", REFUSED_KEY),
    503: ("the model server failed (HTTP 503)", SERVER_FAILED),
}


@pytest.fixture
def site_env(site_env: dict[str, str]) -> dict[str, str]:
    # A failure that could be retried is given up at once: one scripted fault per call.
    return {**site_env, "AGENT_LLM_MAX_RETRIES": "0"}


@pytest.fixture
def token(live_site: str, site_env: dict[str, str]) -> str:
    return login_token(site_env)


def fault(llm: ScriptedLLM, status: int) -> None:
    llm.fault(status, body={"error": {"message": LEAK, "type": "server_error"}})


def assert_nothing_leaked(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, text


def test_the_task_api_shows_a_fixed_sentence(live_site: str, token: str, llm: ScriptedLLM) -> None:
    headers = {"Authorization": f"Token {token}"}
    with httpx.Client(base_url=live_site, headers=headers, timeout=60) as client:
        for status, (error, text) in FAULTS.items():
            fault(llm, status)
            answer = client.post("/api/tasks", json={"prompt": "hi", "session": f"api:f{status}"})
            assert answer.status_code == 200, answer.text
            assert_nothing_leaked(answer.text)
            task = answer.json()
            assert (task["status"], task["error"], task["text"]) == ("failed", error, text)
            [step] = task["trace"]
            assert step["error"] == error
            again = client.get(f"/api/tasks/{task['id']}")
            assert_nothing_leaked(again.text)
            messages = client.get(f"/api/sessions/api:f{status}/messages")
            assert_nothing_leaked(messages.text)
    assert len(llm.requests) == len(FAULTS)


def test_the_openai_door_shows_a_fixed_sentence(
    live_site: str, token: str, llm: ScriptedLLM
) -> None:
    user = [{"role": "user", "content": "hi"}]
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=live_site, headers=headers, timeout=60) as client:
        for status, (_, text) in FAULTS.items():
            fault(llm, status)
            answer = client.post(
                "/v1/chat/completions", json={"model": "agentsite", "messages": user}
            )
            assert answer.status_code >= 400
            assert_nothing_leaked(answer.text)
            assert answer.json()["error"]["message"] == text

    fault(llm, 400)
    door = openai.OpenAI(base_url=f"{live_site}/v1", api_key=token, max_retries=0)
    stream = door.chat.completions.create(model="agentsite", messages=user, stream=True)  # type: ignore[arg-type]
    with pytest.raises(openai.APIError) as caught:
        list(stream)
    assert caught.value.message == REJECTED


async def test_the_chat_shows_a_fixed_sentence(
    live_site: str, token: str, llm: ScriptedLLM
) -> None:
    import websockets

    url = live_site.replace("http", "ws") + f"/ws/chat/leak/?token={token}"
    async with websockets.connect(url, origin=live_site) as chat:
        assert json.loads(await chat.recv())["type"] == "history"
        for status, (_, text) in FAULTS.items():
            fault(llm, status)
            await chat.send(json.dumps({"type": "message", "content": f"try {status}"}))
            frames = await until_reply(chat)
            assert_nothing_leaked(json.dumps(frames))
            assert frames[-1]["content"] == text

    async with websockets.connect(url, origin=live_site) as chat:
        history = json.loads(await chat.recv())
        assert_nothing_leaked(json.dumps(history))


async def until_reply(chat: Any) -> list[dict[str, Any]]:
    """The frames of a turn, up to the agent's message or an error."""
    frames = []
    while True:
        frame = json.loads(await chat.recv())
        frames.append(frame)
        if frame["type"] == "error" or frame.get("role") == "assistant":
            return frames
