"""The chat page's model picker on the wire, over real sockets to daphne: `{"type": "model"}`
stores an allowed id on the session, where `/model` stores it, and every socket of the chat
hears of it; any other id gets an error frame and changes nothing."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.llm_server import ScriptedLLM
from tests.test_history_frames import chat, site  # noqa: F401  (the `site` fixture)
from tests.test_model_allowlist_live import refusal

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def site_env(site_env: dict[str, str]) -> dict[str, str]:
    return {**site_env, "AGENT_MODELS": "openai/second"}


async def recv(socket: Any) -> dict[str, Any]:
    async with asyncio.timeout(10):
        return dict(json.loads(await socket.recv()))


async def pick(socket: Any, model: object) -> None:
    await socket.send(json.dumps({"type": "model", "model": model}))


async def test_a_picked_model_is_stored_and_shown_to_every_socket_of_the_chat(
    site: tuple[str, str],  # noqa: F811
    llm: ScriptedLLM,
) -> None:
    async with chat(site, "picked") as (first, history), chat(site, "picked") as (second, _):
        assert history["model"] == "openai/scripted"

        for wrong in ("openai/gpt-4o", "ollama/llama3"):
            await pick(first, wrong)
            assert await recv(first) == {"type": "error", "message": refusal(wrong)}
        await pick(first, 7)
        assert (await recv(first))["type"] == "error"

        await pick(first, "openai/second")
        assert await recv(first) == {"type": "model", "model": "openai/second"}
        assert await recv(second) == {"type": "model", "model": "openai/second"}

        llm.reply("from the second model")
        await second.send(json.dumps({"type": "message", "content": "hello"}))
        while (await recv(second))["type"] != "thinking_finished":
            pass
    assert [r["model"] for r in llm.requests] == ["second"]

    async with chat(site, "picked") as (socket, history):
        assert history["model"] == "openai/second"
        # Nothing of the picks went into the conversation.
        assert [m["role"] for m in history["messages"]] == ["user", "assistant"]
        # `/model NAME` is heard by every socket the same way.
        await socket.send(json.dumps({"type": "message", "content": "/model openai/scripted"}))
        assert await recv(socket) == {"type": "model", "model": "openai/scripted"}
        reply = await recv(socket)
        assert reply["content"] == "This session now uses openai/scripted."


@pytest.mark.usefixtures("agent_settings")
def test_a_choice_the_operator_took_off_the_list_shows_as_the_model_in_use(settings: Any) -> None:
    from agent.turn import model_in_use

    settings.AGENT_MODELS = ["openai/second"]
    assert model_in_use("openai/second") == "openai/second"
    # Its turns fall back to AGENT_MODEL, and the picker says so rather than the old choice.
    settings.AGENT_MODELS = []
    assert model_in_use("openai/second") == "openai/scripted"
    assert model_in_use("") == "openai/scripted"
