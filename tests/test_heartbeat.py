"""The heartbeat: HEARTBEAT.md with open tasks runs a turn without history; anything worth
saying reaches the owner's latest web chat; no open task means no model call at all."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User

from agent.doors.worker import ensure_schedules, run_heartbeat
from agent.turn.service import SessionRef, run_turn
from sessions_app.models import Message, Session
from tests.jobs import as_worker
from tests.llm_server import ScriptedLLM

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]

NOTHING_TO_DO = """# Heartbeat tasks

<!-- Add tasks below; the agent looks at them every half hour.
- [ ] this one is in a comment -->

## Done
- [x] water the plants
- [ ]
"""


@pytest.fixture
def owner(db: None) -> User:
    return User.objects.create_superuser("root", password="pw")


beat = as_worker(run_heartbeat)


def messages(key: str) -> list[tuple[str, str]]:
    return list(Message.objects.filter(session__key=key).values_list("role", "content"))


@pytest.mark.parametrize("text", [None, "", "\n  \n", NOTHING_TO_DO])
async def test_nothing_to_do_costs_no_model_call(
    llm: ScriptedLLM, workspace: Path, owner: User, text: str | None
) -> None:
    if text is not None:
        (workspace / "HEARTBEAT.md").write_text(text)
    assert await beat() == "idle"
    assert llm.requests == []
    assert not await sync_to_async(Session.objects.filter(key="heartbeat").exists)()


async def test_open_tasks_run_a_turn_and_news_reach_the_latest_web_chat(
    llm: ScriptedLLM, workspace: Path, owner: User
) -> None:
    (workspace / "HEARTBEAT.md").write_text(NOTHING_TO_DO + "- [ ] remind me to stretch\n")
    for key in ("web:old", "web:new"):
        llm.reply("hi")
        await run_turn(SessionRef(key, owner), "hello", channel="web")

    llm.reply("Time to stretch!")
    assert await beat() == "delivered"
    request = llm.requests[-1]
    tasks = request["messages"][-1]["content"]
    assert "remind me to stretch" in tasks and "water the plants" not in tasks
    assert "in a comment" not in tasks
    assert (await sync_to_async(messages)("web:new"))[-1] == ("assistant", "Time to stretch!")
    assert len(await sync_to_async(messages)("web:old")) == 2

    llm.reply("HEARTBEAT_OK")
    assert await beat() == "quiet"
    assert [m["role"] for m in llm.requests[-1]["messages"]] == ["system", "user"]  # no history
    assert len(await sync_to_async(messages)("web:new")) == 3
    heartbeat = await sync_to_async(Session.objects.get)(key="heartbeat")
    assert heartbeat.owner_id == owner.pk


async def test_news_without_a_web_chat_stay_in_the_heartbeat_session(
    llm: ScriptedLLM, workspace: Path, owner: User
) -> None:
    (workspace / "HEARTBEAT.md").write_text("- check the disk\n")
    llm.reply("The disk is 91% full.")
    assert await beat() == "kept"
    assert (await sync_to_async(messages)("heartbeat"))[-1] == (
        "assistant",
        "The disk is 91% full.",
    )


def test_the_heartbeat_schedule_follows_its_setting(settings: Any) -> None:
    from django_q.models import Schedule

    settings.AGENT_HEARTBEAT_INTERVAL = 600
    ensure_schedules()
    schedule = Schedule.objects.get(name="Heartbeat")
    assert (schedule.func, schedule.schedule_type, schedule.minutes) == (
        "agent.doors.worker.run_heartbeat",
        Schedule.MINUTES,
        10,
    )
    settings.AGENT_HEARTBEAT_INTERVAL = 0
    ensure_schedules()
    assert not Schedule.objects.filter(name="Heartbeat").exists()
