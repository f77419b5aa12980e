"""The turn service: saving, history, run records, slash commands, locking, failures."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from pathlib import Path
from unittest.mock import ANY

import pytest
from asgiref.sync import sync_to_async

from agent.events import Collector
from agent.turn import InvalidInput, ModelNotConfigured, run_turn
from sessions_app.models import Message, Run, Session
from tests.llm_server import ScriptedLLM

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]


@sync_to_async
def messages_of(key: str) -> list[Message]:
    return list(Message.objects.filter(session__key=key).order_by("id"))


@sync_to_async
def runs_of(key: str) -> list[Run]:
    return list(Run.objects.filter(session__key=key).order_by("created"))


async def test_turn_saves_every_message_and_a_run_record(llm: ScriptedLLM, workspace: Path) -> None:
    llm.tool_call("write_file", {"path": "hello.txt", "content": "Hello World"})
    llm.reply("Done.")
    events = Collector()

    result = await run_turn("cli:direct", "create hello.txt", channel="cli", emit=events)

    assert result.success and result.text == "Done."
    saved = await messages_of("cli:direct")
    assert [m.role for m in saved] == ["user", "assistant", "tool", "assistant"]
    assert saved[0].content == "create hello.txt"
    assert saved[1].tool_calls[0]["function"]["name"] == "write_file"
    assert saved[2].tool_call_id == saved[1].tool_calls[0]["id"] and saved[2].name == "write_file"
    assert saved[1].usage["total_tokens"] > 0
    (run,) = await runs_of("cli:direct")
    assert run.status == "succeeded" and run.iterations == 2
    assert run.tools_used == ["write_file"]
    assert run.usage["total_tokens"] == sum(m.usage["total_tokens"] for m in saved if m.usage)
    assert run.duration is not None and run.duration >= 0
    assert run.text == "Done." and run.error is None
    assert {m.run_id for m in saved} == {run.id}

    frames = events.frames()
    assert frames[0] == {"type": "thinking_started", "run_id": str(run.id), "model": run.model}
    assert frames[1] == {
        "type": "message",
        "role": "user",
        "content": "create hello.txt",
        "run_id": str(run.id),
    }
    used = frames[-2].pop("usage")
    assert frames[-2] == {"type": "thinking_finished", "run_id": str(run.id)}
    assert used["total_tokens"] == run.usage["total_tokens"] and used["cost"] is None
    written = frames[-1].pop("created")
    assert run.finished <= datetime.fromisoformat(written) < run.finished + timedelta(seconds=5)
    assert frames[-1] == {
        "type": "message",
        "role": "assistant",
        "content": "Done.",
        "run_id": str(run.id),
        "usage": used,
        "model": run.model,
    }


async def test_history_is_carried_into_the_next_turn(llm: ScriptedLLM) -> None:
    llm.reply("Nice to meet you, Ada.")
    await run_turn("api:1", "My name is Ada.", channel="api")
    llm.reply("Your name is Ada.")
    await run_turn("api:1", "What is my name?", channel="api")

    sent = llm.requests[1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert sent[1]["content"] == "My name is Ada."
    assert sent[2]["content"] == "Nice to meet you, Ada."
    assert sent[3]["content"].endswith("What is my name?")
    assert "[Current time:" in sent[3]["content"]


async def test_history_window_starts_at_a_user_message(llm: ScriptedLLM, settings) -> None:
    settings.AGENT_MEMORY_WINDOW = 6
    for index in range(3):
        llm.tool_call("list_dir", {}).reply(f"answer {index}")
        await run_turn("api:w", f"question {index}", channel="api")
    llm.reply("last")
    await run_turn("api:w", "final", channel="api")

    sent = llm.requests[-1]["messages"]
    # The last six messages begin with turn 1's tool result and its answer; both go, so
    # that the history opens with a user message and no result lacks its call.
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert sent[1]["content"] == "question 2"
    assert sent[4]["content"] == "answer 2"


async def test_model_failure_saves_the_user_message_but_not_the_error(llm: ScriptedLLM) -> None:
    llm.fault(401, body={"error": {"message": "bad key"}})
    failed = await run_turn("api:2", "first try", channel="api")
    assert not failed.success and failed.error_kind == "auth"
    assert "AGENT_API_KEY" in failed.text and "bad key" not in failed.text

    llm.reply("second answer")
    ok = await run_turn("api:2", "second try", channel="api")
    assert ok.success

    saved = await messages_of("api:2")
    assert [(m.role, m.content) for m in saved] == [
        ("user", "first try"),
        ("user", "second try"),
        ("assistant", "second answer"),
    ]
    sent = llm.requests[-1]["messages"]
    assert all("bad key" not in str(m.get("content")) for m in sent)
    runs = await runs_of("api:2")
    assert [r.status for r in runs] == ["failed", "succeeded"]
    assert runs[0].error == "the model provider did not accept the site's credentials"


async def test_no_model_configured(settings) -> None:
    settings.AGENT_MODEL = ""
    with pytest.raises(ModelNotConfigured) as caught:
        await run_turn("cli:direct", "hello", channel="cli")
    assert "AGENT_MODEL" in str(caught.value)


@pytest.mark.parametrize(
    ("content", "model", "field"),
    [
        ("", None, "content"),
        ("   ", None, "content"),
        ("x" * 100_001, None, "content"),
        ("hi", "bad model!", "model"),
    ],
)
async def test_bad_input_is_refused_and_nothing_is_stored(
    content: str, model: str | None, field: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        await run_turn("api:bad", content, channel="api", model=model)
    assert caught.value.field == field
    assert await messages_of("api:bad") == []


async def test_per_call_model_overrides_the_default(llm: ScriptedLLM, settings) -> None:
    settings.AGENT_MODELS = ["openai/other-model"]
    llm.reply("ok")
    await run_turn("api:m", "hi", channel="api", model="openai/other-model")
    assert llm.requests[0]["model"] == "other-model"


async def test_slash_model_switches_the_session_model(llm: ScriptedLLM, settings) -> None:
    shown = await run_turn("web:s", "/model", channel="web")
    assert shown.text == "Model: openai/scripted"
    settings.AGENT_MODELS = ["openai/switched"]
    switched = await run_turn("web:s", "/model openai/switched", channel="web")
    assert "openai/switched" in switched.text
    llm.reply("ok")
    await run_turn("web:s", "hello", channel="web")
    assert llm.requests[0]["model"] == "switched"
    refused = run_turn("web:s", "/model no spaces allowed", channel="web")
    with pytest.raises(InvalidInput):
        await refused


async def test_slash_help_and_unknown_slash_text(llm: ScriptedLLM) -> None:
    help_result = await run_turn("web:h", "/help", channel="web")
    assert "/new" in help_result.text and "/stop" in help_result.text
    assert llm.requests == []
    llm.reply("a path, not a command")
    result = await run_turn("web:h", "/etc/hosts is what file?", channel="web")
    assert result.text == "a path, not a command"


async def test_slash_new_archives_the_conversation(llm: ScriptedLLM) -> None:
    llm.reply("remembered")
    await run_turn("web:n", "remember this", channel="web")
    result = await run_turn("web:n", "/new", channel="web")
    assert "2 messages archived" in result.text
    llm.reply("fresh")
    await run_turn("web:n", "hello again", channel="web")
    sent = llm.requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user"]
    assert len(await messages_of("web:n")) == 4


async def test_stop_cancels_the_running_turn(llm: ScriptedLLM, workspace: Path) -> None:
    llm.tool_call("exec", {"command": "sleep 20"})
    events = Collector()
    turn = asyncio.create_task(run_turn("web:stop", "run a long thing", channel="web", emit=events))
    while not events.of_type("tool_call"):
        await asyncio.sleep(0.02)

    stop = await run_turn("web:stop", "/stop", channel="web")
    assert stop.text == "Stopped 1 task."
    with pytest.raises(asyncio.CancelledError):
        await turn

    (run,) = await runs_of("web:stop")
    assert run.status == "cancelled" and run.finished is not None
    saved = await messages_of("web:stop")
    assert [m.role for m in saved] == ["user", "assistant", "tool"]
    assert saved[2].content.startswith("Error: the turn was stopped")
    frames = events.frames()
    # What the stopped turn used still counts.
    assert frames[-1]["usage"]["total_tokens"] == run.usage["total_tokens"] > 0
    assert frames[-1] == {"type": "thinking_finished", "run_id": str(run.id), "usage": ANY}
    assert frames[-2]["type"] == "tool_result" and frames[-2]["result"].startswith(
        "Error: the turn was stopped"
    )
    assert run.text == "Stopped."
    assert (await run_turn("web:stop", "/stop", channel="web")).text == "No running task to stop."


async def test_a_second_stop_still_saves_everything_before_the_next_turn(
    llm: ScriptedLLM, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Slow writes (a busy database) keep the stopped turn's messages queued while a second
    # stop arrives; the next turn must still find every one of them, in order.
    from agent.turn import message_log

    write = message_log.store.add_message

    async def slow_write(**kwargs: object) -> object:
        await asyncio.sleep(0.2)
        return await write(**kwargs)

    monkeypatch.setattr(message_log.store, "add_message", slow_write)
    llm.tool_call("write_file", {"path": "a.txt", "content": "x"}).hang(20).reply("next answer")
    events = Collector()
    turn = asyncio.create_task(run_turn("web:twice", "write it", channel="web", emit=events))
    while not events.of_type("tool_result"):
        await asyncio.sleep(0.02)
    while len(llm.requests) < 2:  # the hanging second model call has begun
        await asyncio.sleep(0.02)
    turn.cancel()
    await asyncio.sleep(0.01)
    turn.cancel()
    with pytest.raises(asyncio.CancelledError):
        await turn
    await run_turn("web:twice", "and now?", channel="web")

    saved = await messages_of("web:twice")
    assert [(m.role, m.content) for m in saved] == [
        ("user", "write it"),
        ("assistant", None),
        ("tool", saved[2].content),
        ("user", "and now?"),
        ("assistant", "next answer"),
    ]
    assert saved[2].tool_call_id == saved[1].tool_calls[0]["id"]
    sent = llm.requests[-1]["messages"]
    assert [m["role"] for m in sent[1:]] == ["user", "assistant", "tool", "user"]


async def test_turns_of_one_session_never_interleave(llm: ScriptedLLM) -> None:
    llm.reply("first", chunks=20).reply("second", chunks=20)
    for step in list(llm._steps):
        step.chunk_delay = 0.01
    order: list[str] = []

    def sink(name: str) -> Collector:
        class Tagged(Collector):
            async def __call__(self, event) -> None:  # type: ignore[no-untyped-def]
                order.append(f"{name}:{event.type}")

        return Tagged()

    await asyncio.gather(
        run_turn("api:lock", "one", channel="api", emit=sink("a")),
        run_turn("api:lock", "two", channel="api", emit=sink("b")),
    )
    owners = [entry.split(":")[0] for entry in order]
    first = owners[0]
    switch = owners.index("b" if first == "a" else "a")
    assert all(owner == first for owner in owners[:switch])
    assert all(owner != first for owner in owners[switch:])
    # The second turn saw the first one's exchange as history.
    assert [m["role"] for m in llm.requests[1]["messages"]] == [
        "system",
        "user",
        "assistant",
        "user",
    ]


async def test_bootstrap_files_reach_the_system_prompt(llm: ScriptedLLM, workspace: Path) -> None:
    (workspace / "AGENTS.md").write_text("Always answer in French.")
    (workspace / "USER.md").write_text("The user is called Ada.")
    llm.reply("Bonjour")
    await run_turn("api:b", "hi", channel="api")
    system = llm.requests[0]["messages"][0]["content"]
    assert "Always answer in French." in system and "The user is called Ada." in system
    assert str(workspace) in system
    assert "[Current time:" not in system


async def test_session_title_comes_from_the_first_message(llm: ScriptedLLM) -> None:
    llm.reply("ok")
    await run_turn("web:t", "Plan a   trip to Lisbon\nin May", channel="web")
    session = await Session.objects.aget(key="web:t")
    assert session.title == "Plan a trip to Lisbon in May"
    assert session.channel == "web" and session.chat_id == "t"


async def test_the_run_watcher_goes_once_no_turn_is_left(llm: ScriptedLLM) -> None:
    from agent.turn import watch

    llm.reply("done")
    await run_turn("cli:watch", "hi", channel="cli")
    # Its poller notices within a poll; then nothing refers to this loop any more.
    await asyncio.sleep(watch.POLL_SECONDS * 2.5)
    assert asyncio.get_running_loop() not in watch._watchers
