"""Memory: long sessions consolidated in the background through a forced `save_memory`
call, /new archiving into memory, the prompt carrying what is remembered, `/api/memory`."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agent.turn import SessionRef, run_turn
from sessions_app import memory as memories
from sessions_app.models import Memory, Message, Session
from tests.llm_server import ScriptedLLM

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]

SAVED = {"history_entry": "We planned the trip to Lisbon.", "memory_update": "Ada likes trains."}


@pytest.fixture(autouse=True)
def inline_worker(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """django-q2 runs queued jobs at once, in the process that queues them (its `sync`
    option, which it reads once at import)."""
    monkeypatch.setattr("django_q.conf.Conf.SYNC", True)
    settings.AGENT_MEMORY_WINDOW = 6


def memory_of(key: str) -> tuple[list[str], str, int]:
    session = Session.objects.get(key=key)
    summaries = [m.content for m in Memory.objects.filter(session=session).order_by("id")]
    return (
        summaries,
        memories.long_term_memory(owner_id=session.owner_id),
        session.last_consolidated,
    )


async def talk(key: str | SessionRef, turns: int, llm: ScriptedLLM) -> None:
    for n in range(turns):
        llm.reply(f"answer {n}")
        assert (await run_turn(key, f"question {n}", channel="cli")).success


async def test_a_long_session_is_consolidated_through_a_forced_tool_call(
    llm: ScriptedLLM,
) -> None:
    await talk("cli:long", 3, llm)  # six messages: not yet past the window
    assert await sync_to_async(Memory.objects.count)() == 0
    llm.reply("answer 3")
    llm.tool_call("save_memory", SAVED)

    await run_turn("cli:long", "question 3", channel="cli")

    consolidation = llm.requests[-1]
    assert consolidation["tool_choice"] == {"type": "function", "function": {"name": "save_memory"}}
    assert "question 0" in consolidation["messages"][1]["content"]
    summaries, long_term, upto = await sync_to_async(memory_of)("cli:long")
    assert summaries == [SAVED["history_entry"]] and long_term == SAVED["memory_update"]
    # Up to a user message: what stays starts a turn, and the newest three stay raw.
    kept = await sync_to_async(
        lambda: list(Message.objects.filter(session__key="cli:long", id__gt=upto))
    )()
    assert kept[0].role == "user" and len(kept) >= 3

    llm.reply("welcome back")
    await run_turn("cli:long", "where were we?", channel="cli")
    sent = llm.requests[-1]["messages"]
    assert "## Memory\n\nAda likes trains." in sent[0]["content"]
    assert "## Earlier in this conversation\n\nWe planned the trip" in sent[0]["content"]
    assert not any("question 0" in str(m.get("content")) for m in sent[1:])


async def test_a_provider_that_refuses_forcing_gets_the_tool_offered(llm: ScriptedLLM) -> None:
    await talk("cli:auto", 3, llm)
    llm.reply("answer 3")
    llm.fault(400, body={"error": {"message": "tool_choice of type function is not supported"}})
    llm.tool_call("save_memory", SAVED)

    await run_turn("cli:auto", "question 3", channel="cli")

    assert llm.requests[-1]["tool_choice"] == "auto"
    summaries, long_term, _ = await sync_to_async(memory_of)("cli:auto")
    assert summaries == [SAVED["history_entry"]] and long_term == SAVED["memory_update"]


async def test_a_model_that_never_saves_leaves_a_plain_archive(llm: ScriptedLLM) -> None:
    await talk("cli:plain", 3, llm)
    llm.reply("answer 3")
    for _ in range(3):
        llm.reply("I would rather chat.")

    await run_turn("cli:plain", "question 3", channel="cli")

    summaries, long_term, upto = await sync_to_async(memory_of)("cli:plain")
    assert len(summaries) == 1 and summaries[0].startswith("Archived conversation:")
    assert "USER: question 0" in summaries[0] and long_term == ""
    assert upto > 0


async def test_new_archives_into_memory_and_starts_empty(llm: ScriptedLLM, ada: Any) -> None:
    session = SessionRef("web:trip", owner=ada)
    await talk(session, 2, llm)
    llm.tool_call("save_memory", SAVED)

    answer = await run_turn(session, "/new", channel="web")

    assert "4 messages archived" in answer.text
    summaries, long_term, _ = await sync_to_async(memory_of)("web:trip")
    assert summaries == [SAVED["history_entry"]] and long_term == SAVED["memory_update"]
    llm.reply("hello again")
    await run_turn(session, "hi", channel="web")
    sent = llm.requests[-1]["messages"]
    assert "Ada likes trains." in sent[0]["content"]  # long-term memory stays
    assert "Earlier in this conversation" not in sent[0]["content"]  # the old one is over
    assert [m["role"] for m in sent] == ["system", "user"]


async def test_new_without_a_working_model_still_clears_and_keeps_the_words(
    llm: ScriptedLLM,
) -> None:
    await talk("cli:down", 2, llm)
    for _ in range(3):
        llm.fault(401, body={"error": {"message": "bad key"}})

    answer = await run_turn("cli:down", "/new", channel="cli")

    assert "4 messages archived" in answer.text
    summaries, _, _ = await sync_to_async(memory_of)("cli:down")
    assert "USER: question 1" in summaries[0]


def test_one_consolidation_of_a_session_at_a_time(ada: Any) -> None:
    session = Session.objects.create(key="web:x", channel="web", chat_id="x", owner=ada)
    lease = memories.claim_consolidation(session_id=session.pk)
    assert lease is not None
    assert memories.claim_consolidation(session_id=session.pk) is None
    memories.release_consolidation(session_id=session.pk, lease=lease)
    assert memories.claim_consolidation(session_id=session.pk) is not None


async def test_new_waits_for_a_running_consolidation_then_archives_the_rest(
    llm: ScriptedLLM,
) -> None:
    import asyncio

    await talk("cli:busy", 2, llm)
    session_id = await sync_to_async(lambda: Session.objects.get(key="cli:busy").pk)()
    lease = await sync_to_async(memories.claim_consolidation)(session_id=session_id)
    assert lease is not None  # as if the worker were consolidating right now

    async def worker_finishes() -> None:
        await asyncio.sleep(1)
        await sync_to_async(memories.release_consolidation)(session_id=session_id, lease=lease)

    finishing = asyncio.create_task(worker_finishes())
    llm.tool_call("save_memory", SAVED)
    answer = await run_turn("cli:busy", "/new", channel="cli")
    await finishing

    assert "4 messages archived" in answer.text
    summaries, _, _ = await sync_to_async(memory_of)("cli:busy")
    assert summaries == [SAVED["history_entry"]]


def test_memory_through_the_api(api: APIClient, ada: Any) -> None:
    Session.objects.create(key="web:a", channel="web", chat_id="a", owner=ada)
    long_term = api.post("/api/memory", {"content": "Ada likes trains."}, format="json")
    assert long_term.status_code == 201 and long_term.json()["session"] is None
    again = api.post("/api/memory", {"content": "twice"}, format="json")
    assert again.status_code == 400 and "session" in again.json()
    summary = api.post("/api/memory", {"session": "web:a", "content": "Trip."}, format="json")
    assert summary.json()["session"] == "web:a"
    assert (
        api.post("/api/memory", {"session": "web:zz", "content": "?"}, format="json").status_code
        == 400
    )

    listed = {m["content"] for m in api.get("/api/memory").json()}
    assert listed == {"Ada likes trains.", "Trip."}
    memory_id = long_term.json()["id"]
    changed = api.patch(f"/api/memory/{memory_id}", {"content": "Ada likes boats."}, format="json")
    assert changed.json()["content"] == "Ada likes boats."

    bob = APIClient()
    bob.force_authenticate(User.objects.create_user("bob"))
    assert bob.get(f"/api/memory/{memory_id}").status_code == 404
    assert bob.get("/api/memory").json() == []
    assert api.delete(f"/api/memory/{memory_id}").status_code == 204
    assert json.loads(api.get("/api/memory").content)[0]["content"] == "Trip."


def test_memories_come_a_page_at_a_time_newest_first(api: APIClient, ada: Any) -> None:
    session = Session.objects.create(key="web:p", channel="web", chat_id="p", owner=ada)
    for n in range(5):
        Memory.objects.create(owner=ada, session=session, content=f"summary {n}")
    first = api.get("/api/memory", {"page_size": 2})
    assert [m["content"] for m in first.json()] == ["summary 4", "summary 3"]
    older = first["Link"].split(";")[0].strip("<>")
    assert 'rel="next"' in first["Link"]
    assert [m["content"] for m in api.get(older).json()] == ["summary 2", "summary 1"]
