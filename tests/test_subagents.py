"""Sub-agents: `spawn` queues one that reports back to its session, `subagent` runs one
inline, `/stop` stops them, and one whose worker died is reported failed."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.utils import timezone

from agent.events import Collector
from agent.job_functions import fail_dead_runs
from agent.tools import ToolContext, ToolRegistry
from agent.tools.background import SpawnTool, SubagentTool
from agent.turn import SessionRef, run_turn
from sessions_app import selectors
from sessions_app.models import Run, Session
from tests.jobs import GroupListener, hold_queue
from tests.llm_server import ScriptedLLM

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]

HIDDEN = {"message", "spawn", "cron", "subagent"}


@pytest.fixture
def ada(db: None) -> User:
    return User.objects.create_user("ada", password="pw")


def offered(request: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools", [])}


def subagent_runs() -> list[Run]:
    return list(Run.objects.filter(parent__isnull=False).select_related("session", "parent"))


async def until(predicate: Any, timeout: float = 10) -> None:
    async with asyncio.timeout(timeout):
        while not await sync_to_async(predicate)():
            await asyncio.sleep(0.05)


async def test_a_spawned_subagent_reports_back_to_its_session(
    llm: ScriptedLLM, ada: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = hold_queue(monkeypatch)
    llm.tool_call("spawn", {"task": "Count the Python files in src/", "label": "count files"})
    llm.reply("I've started counting.")
    events = Collector()
    await run_turn(SessionRef("web:a1", ada), "how many files?", channel="web", emit=events)

    [run] = await sync_to_async(subagent_runs)()
    assert run.status == "queued" and run.label == "count files"
    assert run.session.key.startswith("subagent:") and run.session.owner_id == ada.pk
    [spawned] = events.of_type("subagent_spawned")
    assert spawned.to_dict() == {
        "type": "subagent_spawned",
        "id": str(run.pk),
        "label": "count files",
    }
    assert queue.names() == ["run_subagent"]
    parent = await sync_to_async(Session.objects.get)(key="web:a1")

    llm.reply("There are 42 Python files.")  # the sub-agent
    llm.reply("The count is in: 42 Python files.")  # the parent, told of it
    async with GroupListener(parent.pk) as heard:
        assert await queue.run_all() == ["succeeded"]
        frames = await heard.frames(until="thinking_finished")
        frames += await heard.frames(until="message")

    sub_request, told = llm.requests[2], llm.requests[3]
    assert sub_request["messages"][0]["content"].startswith("You are a sub-agent")
    assert [m["role"] for m in sub_request["messages"]] == ["system", "user"]  # no history
    assert "Count the Python files in src/" in sub_request["messages"][1]["content"]
    assert not offered(sub_request) & HIDDEN and "exec" in offered(sub_request)
    assert "There are 42 Python files." in told["messages"][-1]["content"]
    assert "how many files?" in str(told["messages"])  # the parent's own history

    assert frames[0] == {
        "type": "subagent_completed",
        "id": str(run.pk),
        "label": "count files",
        "status": "succeeded",
    }
    assert frames[-1]["role"] == "assistant"
    assert frames[-1]["content"] == "The count is in: 42 Python files."
    shown = await sync_to_async(selectors.messages_for_display)(session=parent)
    assert [m["role"] for m in shown][-2:] == ["system", "assistant"]
    announce = await sync_to_async(Run.objects.get)(session=parent, channel="system")
    assert announce.status == "succeeded"


async def test_the_subagent_tool_runs_one_inline(
    llm: ScriptedLLM, ada: User, settings: Any
) -> None:
    settings.AGENT_SUBAGENT_MAX_ITERATIONS = 2
    llm.tool_call("subagent", {"task": "List the workspace"})
    llm.tool_call("list_dir", {"path": "."})  # the sub-agent's first call
    llm.tool_call("list_dir", {"path": "."})  # its second: the cap
    llm.reply("Done.")
    events = Collector()
    await run_turn(SessionRef("web:a1", ada), "look around", channel="web", emit=events)

    [run] = await sync_to_async(subagent_runs)()
    assert run.iterations == 2 and run.status == "failed"  # stopped by its own cap
    assert [e.to_dict()["type"] for e in events.events if "subagent" in e.type] == [
        "subagent_spawned",
        "subagent_completed",
    ]
    result = events.of_type("tool_result")[0].to_dict()["result"]
    assert result.startswith("Error: the sub-agent failed")
    assert not offered(llm.requests[1]) & HIDDEN
    assert llm.requests[1]["messages"][0]["content"].startswith("You are a sub-agent")


async def test_stop_ends_the_sessions_subagents_queued_or_running(
    llm: ScriptedLLM, ada: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = hold_queue(monkeypatch)
    llm.tool_calls([("spawn", {"task": "one"}), ("spawn", {"task": "two"})]).reply("Started.")
    await run_turn(SessionRef("web:a1", ada), "go", channel="web")
    first, second = queue.jobs
    queue.jobs = [first]
    llm.hang(30)  # the first sub-agent's model call
    worker = asyncio.ensure_future(queue.run_all())
    await until(lambda: Run.objects.filter(channel="subagent", status="running").exists())

    answer = await run_turn(SessionRef("web:a1", ada), "/stop", channel="web")
    assert answer.text == "Stopped 2 tasks."
    assert await asyncio.wait_for(worker, 10) == ["cancelled"]
    queue.jobs = [second]
    assert await queue.run_all() == ["cancelled"]
    assert {r.status for r in await sync_to_async(subagent_runs)()} == {"cancelled"}
    assert len(llm.requests) == 3  # the parent's two calls and the hung one: nothing announced


async def test_stop_of_the_parent_stops_an_inline_subagent(llm: ScriptedLLM, ada: User) -> None:
    llm.tool_call("subagent", {"task": "wait"}).hang(30)
    turn = asyncio.ensure_future(run_turn(SessionRef("web:a1", ada), "go", channel="web"))
    await until(lambda: Run.objects.filter(channel="subagent", status="running").exists())
    answer = await run_turn(SessionRef("web:a1", ada), "/stop", channel="web")
    assert answer.text == "Stopped 2 tasks."
    with pytest.raises(asyncio.CancelledError):  # as any stopped turn
        await asyncio.wait_for(turn, 10)
    [run] = await sync_to_async(subagent_runs)()
    assert run.status == "cancelled"


async def test_a_subagent_whose_worker_died_is_reported_failed(
    llm: ScriptedLLM, ada: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = hold_queue(monkeypatch)
    llm.tool_call("spawn", {"task": "long job", "label": "long"}).reply("Started.")
    await run_turn(SessionRef("web:a1", ada), "go", channel="web")
    queue.jobs.clear()  # taken by a worker that then died mid-turn:
    long_ago = timezone.now() - timedelta(minutes=5)
    await sync_to_async(Run.objects.filter(channel="subagent").update)(
        status="running", started=long_ago, last_alive=long_ago
    )

    assert await sync_to_async(fail_dead_runs)() == 1
    assert queue.names() == ["announce_subagent"]
    parent = await sync_to_async(Session.objects.get)(key="web:a1")
    llm.reply("Sorry, the long job failed: its worker stopped.")
    async with GroupListener(parent.pk) as heard:
        await queue.run_all()
        frames = await heard.frames(until="subagent_completed")
    assert frames[-1]["status"] == "failed"
    assert "[The sub-agent 'long' failed.]" in llm.requests[-1]["messages"][-1]["content"]


@pytest.mark.parametrize("tool", ["spawn", "subagent"])
async def test_where_no_sub_agent_may_start_both_tools_say_so(tool: str) -> None:
    registry = ToolRegistry()
    registry.register(SpawnTool())
    registry.register(SubagentTool())
    result = await registry.execute(tool, {"task": "count"}, ToolContext.detached())
    assert result == "Error: sub-agents cannot be started from here"
