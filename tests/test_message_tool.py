"""The `message` tool: to the conversation the turn answers, to another one of the same user,
and never the same answer twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User

from agent.events import Collector
from agent.job_functions import run_cron_job, run_user_heartbeat
from agent.tools import ToolContext, ToolRegistry
from agent.tools.guards.folders import user_folder
from agent.tools.messaging import MessageTool
from agent.turn import SessionRef, run_turn
from cron_app import services
from sessions_app.models import Message, Session
from tests.conftest import run_manage
from tests.jobs import GroupListener, as_worker
from tests.llm_server import ScriptedLLM

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]


def messages(key: str, owner: User | None = None) -> list[tuple[str, str]]:
    found = Message.objects.filter(session__key=key, session__owner=owner)
    return list(found.values_list("role", "content"))


async def test_a_progress_message_then_the_reply_each_reach_the_conversation(
    llm: ScriptedLLM, ada: User
) -> None:
    llm.tool_call("message", {"content": "Half of the files are done."})
    llm.reply("All done.")
    events = Collector()

    result = await run_turn(SessionRef("web:w1", ada), "convert them", channel="web", emit=events)

    sent = [(e.role, e.content) for e in events.of_type("message")]
    assert sent == [
        ("user", "convert them"),
        ("assistant", "Half of the files are done."),
        ("assistant", "All done."),  # other tabs see no stream: they need the reply
    ]
    assert result.text == "All done."
    # The history stays whole for the next model call: the call, its result, the reply.
    stored = await sync_to_async(messages)("web:w1", ada)
    assert [role for role, _ in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[2] == ("tool", "Message sent.")


async def test_a_reply_that_repeats_the_message_is_not_sent_twice(
    llm: ScriptedLLM, ada: User
) -> None:
    llm.tool_call("message", {"content": "The answer is 42."})
    llm.reply("The answer is 42.\n")
    events = Collector()

    result = await run_turn(SessionRef("web:w4", ada), "answer?", channel="web", emit=events)

    sent = [(e.role, e.content) for e in events.of_type("message")]
    assert sent == [("user", "answer?"), ("assistant", "The answer is 42.")]
    assert result.success and result.delivered


async def test_a_turn_that_fails_after_a_message_still_says_why(
    llm: ScriptedLLM, ada: User
) -> None:
    llm.tool_call("message", {"content": "Working on it..."})
    llm.fault(400, body={"error": {"message": "bad request"}})
    events = Collector()

    result = await run_turn(SessionRef("web:w5", ada), "go", channel="web", emit=events)

    assert not result.success and not result.delivered
    replies = [e.content for e in events.of_type("message") if e.role == "assistant"]
    assert replies == ["Working on it...", result.text]


async def test_without_the_tool_the_reply_is_sent_as_before(llm: ScriptedLLM, ada: User) -> None:
    llm.reply("Hello.")
    events = Collector()
    result = await run_turn(SessionRef("web:w2", ada), "hi", channel="web", emit=events)
    assert not result.delivered
    assert ("assistant", "Hello.") in [(e.role, e.content) for e in events.of_type("message")]


async def test_a_message_to_another_chat_reaches_only_the_same_users_chat(
    llm: ScriptedLLM, ada: User
) -> None:
    grace = await sync_to_async(User.objects.create_user)("grace", password="pw")
    theirs = await sync_to_async(Session.objects.create)(
        key="web:news", channel="web", chat_id="news", owner=grace
    )
    mine = await sync_to_async(Session.objects.create)(
        key="web:news", channel="web", chat_id="news", owner=ada
    )
    llm.tool_call("message", {"content": "The build is green.", "channel": "web",
                              "chat_id": "news"})  # fmt: skip
    llm.reply("Told the news chat.")
    events = Collector()

    async with GroupListener(mine.pk) as heard:
        result = await run_turn(SessionRef("web:w3", ada), "tell", channel="web", emit=events)
        frames = await heard.frames(until="message")

    assert frames == [{"type": "message", "role": "assistant", "content": "The build is green."}]
    assert await sync_to_async(messages)("web:news", ada) == [("assistant", "The build is green.")]
    assert await sync_to_async(messages)("web:news", grace) == []
    assert theirs.pk != mine.pk
    # Another conversation was told; this one still gets its reply.
    assert not result.delivered
    assert ("assistant", "Told the news chat.") in [
        (e.role, e.content) for e in events.of_type("message")
    ]


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ({"content": "x", "channel": "web"}, "give chat_id with channel"),
        ({"content": "x", "channel": "web", "chat_id": "../etc"}, "may hold only"),
        ({"content": "x", "channel": "Web Chat", "chat_id": "a"}, "not a channel name"),
        ({"content": "   "}, "the message is empty"),
        ({}, "'content' is a required property"),
    ],
)
async def test_a_bad_target_is_refused_with_a_reason(
    arguments: dict[str, Any], reason: str
) -> None:
    registry = ToolRegistry()
    registry.register(MessageTool())
    sent: list[str] = []

    async def deliver(content: str, *, session_key: str | None = None) -> None:
        sent.append(content)

    ctx = ToolContext(session_key="web:a", channel="web", deliver=deliver)
    result = await registry.execute("message", arguments, ctx)
    assert result.startswith("Error") and reason in result
    assert sent == []


async def test_a_chat_id_alone_stays_on_the_turns_channel() -> None:
    registry = ToolRegistry()
    registry.register(MessageTool())
    targets: list[str | None] = []

    async def deliver(content: str, *, session_key: str | None = None) -> str | None:
        targets.append(session_key)
        return session_key  # another chat: the one it went to

    ctx = ToolContext(session_key="api:a", channel="api", deliver=deliver)
    assert await registry.execute("message", {"content": "x", "chat_id": "b"}, ctx) == (
        "Message sent to api:b."
    )
    assert targets == ["api:b"]


async def test_a_cron_jobs_message_goes_to_the_jobs_chat_once(llm: ScriptedLLM, ada: User) -> None:
    target = await sync_to_async(Session.objects.create)(
        key="web:c1", channel="web", chat_id="c1", owner=ada
    )
    job = await sync_to_async(services.create_job)(
        owner=ada, message="Remind me to drink water", session="web:c1", kind="every",
        every_seconds=60,
    )  # fmt: skip
    llm.tool_call("message", {"content": "Time to drink some water."})
    llm.reply("Reminded.")

    due = job.next_run.isoformat()  # as a dispatcher that claimed the run queues it
    async with GroupListener(target.pk) as heard:
        assert await as_worker(run_cron_job)(job.pk, due=due) == "succeeded"
        frames = await heard.frames(until="cron_executed")

    assert frames == [
        {"type": "message", "role": "assistant", "content": "Time to drink some water."},
        {"type": "cron_executed", "job_id": str(job.pk), "status": "succeeded"},
    ]
    assert await sync_to_async(messages)("web:c1", ada) == [
        ("assistant", "Time to drink some water.")
    ]


async def test_the_heartbeats_message_reaches_the_latest_chat_once(
    llm: ScriptedLLM, workspace: Path, ada: User
) -> None:
    llm.reply("hi")
    await run_turn(SessionRef("web:h1", ada), "hello", channel="web")
    (user_folder(workspace, "ada") / "HEARTBEAT.md").write_text("- [ ] remind me to stretch\n")
    llm.tool_call("message", {"content": "Time to stretch!"})
    llm.reply("Sent the reminder.")

    assert await as_worker(run_user_heartbeat)(ada.pk) == "delivered"

    stored = await sync_to_async(messages)("web:h1", ada)
    assert stored[-1] == ("assistant", "Time to stretch!")
    assert len(stored) == 3


def test_the_command_line_prints_a_message_before_the_reply(
    site_env: dict[str, str], llm: ScriptedLLM
) -> None:
    llm.tool_call("message", {"content": "Looking into it now."})
    llm.reply("The answer is 42.")

    done = run_manage(site_env, "agent", "-m", "what is the answer?")

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["Looking into it now.", "The answer is 42."]
