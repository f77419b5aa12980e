"""What waits for a person in a turn goes with everything it starts: a sub-agent (`spawn`,
`subagent`, one a cron run starts), a job it schedules, and the turn that announces how a
sub-agent ended. Those that have no one to ask refuse such a call; `exec` never runs
unasked by way of them. The runs record what they carried (`Run.approve_tools`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.utils import timezone

from agent.turn import SessionRef, run_turn
from agent.turn.approvals import NO_ONE_TO_ASK
from cron_app import dispatch
from cron_app import services as job_services
from cron_app.models import CronJob
from sessions_app import services
from sessions_app.models import Approval, Run
from tests.conftest import folder_of
from tests.jobs import hold_queue
from tests.llm_server import ScriptedLLM

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]

REFUSED = NO_ONE_TO_ASK.format(name="exec")


@pytest.fixture
def ada(db: None) -> User:
    return User.objects.create_user("ada", password="pw")


@sync_to_async
def chat_where_exec_waits(key: str, owner: User, *, always: bool = False) -> None:
    """The chat `key`, whose `exec` waits for its owner's yes (answered "always" there, with
    `always`)."""
    session = services.get_or_create_session(key=key, owner=owner)
    services.set_session_tools(
        session=session, approve_tools=["exec"], allowed_tools=["exec"] if always else []
    )


@sync_to_async
def chat_where_exec_waits_no_more(key: str, owner: User) -> None:
    session = services.get_or_create_session(key=key, owner=owner)
    services.set_session_tools(session=session, approve_tools=[])


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def offered(request: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools") or []}


@sync_to_async
def run_on(channel: str, **where: Any) -> Run:
    return Run.objects.get(channel=channel, **where)


async def test_a_sub_agent_spawned_where_exec_waits_is_refused_it(
    llm: ScriptedLLM, ada: User, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = hold_queue(monkeypatch)
    await chat_where_exec_waits("web:c1", ada)
    llm.tool_call("spawn", {"task": "Run: touch spawned.txt", "label": "toucher"})
    llm.reply("Started.")
    await run_turn(SessionRef("web:c1", ada), "touch it in the background", channel="web")

    llm.tool_call("exec", {"command": "touch spawned.txt"})  # the sub-agent
    llm.reply("I could not run it.")
    llm.reply("The helper could not touch the file.")  # the announcing turn, in web:c1
    assert await queue.run_all() == ["succeeded"]

    assert not (folder_of(workspace, "ada") / "spawned.txt").exists()
    first, second = llm.requests[2:4]
    assert "exec" in offered(first)  # offered, and refused for want of a person to ask
    assert tool_results(second) == [REFUSED]
    spawned = await run_on("subagent")
    assert spawned.approve_tools == ["exec"] and spawned.status == "succeeded"
    told = await run_on("system", session__key="web:c1")
    assert told.approve_tools == ["exec"] and told.status == "succeeded"
    assert told.text == "The helper could not touch the file."


async def test_the_subagent_tool_where_exec_waits_is_refused_it(
    llm: ScriptedLLM, ada: User, workspace: Path
) -> None:
    await chat_where_exec_waits("web:c2", ada)
    llm.tool_call("subagent", {"task": "Run: touch inline.txt"})
    llm.tool_call("exec", {"command": "touch inline.txt"})  # the sub-agent
    llm.reply("I could not run it.")
    llm.reply("It could not.")  # the chat's turn, with the sub-agent's answer
    result = await run_turn(SessionRef("web:c2", ada), "touch it", channel="web")

    assert result.status == "succeeded" and result.text == "It could not."
    assert not (folder_of(workspace, "ada") / "inline.txt").exists()
    assert tool_results(llm.requests[2]) == [REFUSED]
    assert (await run_on("subagent")).approve_tools == ["exec"]


async def test_always_in_the_chat_does_not_go_with_its_sub_agents(
    llm: ScriptedLLM, ada: User, workspace: Path
) -> None:
    await chat_where_exec_waits("web:c3", ada, always=True)
    llm.tool_call("exec", {"command": "touch mine.txt"})  # runs: "always" here
    llm.tool_call("subagent", {"task": "Run: touch theirs.txt"})
    llm.tool_call("exec", {"command": "touch theirs.txt"})  # the sub-agent's: refused
    llm.reply("I could not run it.")
    llm.reply("Done what I could.")
    result = await run_turn(SessionRef("web:c3", ada), "touch both", channel="web")

    assert result.status == "succeeded"
    folder = folder_of(workspace, "ada")
    assert (folder / "mine.txt").exists()
    assert not (folder / "theirs.txt").exists()
    assert tool_results(llm.requests[3]) == [REFUSED]


async def test_a_job_the_chat_schedules_and_its_sub_agents_are_refused_exec(
    llm: ScriptedLLM, ada: User, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await chat_where_exec_waits("web:c4", ada)
    llm.tool_call("cron", {"action": "add", "message": "Tidy up", "every_seconds": 3600})
    llm.reply("Scheduled.")
    await run_turn(SessionRef("web:c4", ada), "tidy up every hour", channel="web")
    job = await sync_to_async(CronJob.objects.get)()
    assert job.approve_tools == ["exec"] and job.tools is None
    # Made elsewhere since: the job carries what waited when it was scheduled.
    await chat_where_exec_waits_no_more("web:c4", ada)

    llm.tool_call("exec", {"command": "touch job.txt"})  # the job's run
    llm.tool_call("subagent", {"task": "Run: touch helper.txt"})
    llm.tool_call("exec", {"command": "touch helper.txt"})  # the run's sub-agent
    llm.reply("I could not run it.")
    llm.reply("Nothing could be tidied.")
    queue = hold_queue(monkeypatch)
    await sync_to_async(CronJob.objects.filter(pk=job.pk).update)(next_run=timezone.now())
    assert await sync_to_async(dispatch.start_due)() == 1
    assert await queue.run_all() == ["succeeded"]

    folder = folder_of(workspace, "ada")
    assert not (folder / "job.txt").exists() and not (folder / "helper.txt").exists()
    assert tool_results(llm.requests[3]) == [REFUSED]  # the run's own exec
    assert tool_results(llm.requests[5]) == [REFUSED]  # its sub-agent's
    ran = await run_on("cron")
    assert ran.approve_tools == ["exec"] and ran.status == "succeeded"
    assert (await run_on("subagent")).approve_tools == ["exec"]


async def test_a_jobs_run_is_refused_what_waits_in_the_chat_it_reports_to(
    llm: ScriptedLLM, ada: User, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job made through the API carries nothing; the chat it reports to is read at each
    run."""
    job = await sync_to_async(job_services.create_job)(
        owner=ada, message="Tidy up", session="web:c5", kind="every", every_seconds=3600
    )
    assert job.approve_tools == [] and job.tools is None
    await chat_where_exec_waits("web:c5", ada)
    llm.tool_call("exec", {"command": "touch job.txt"}).reply("I could not run it.")
    queue = hold_queue(monkeypatch)
    await sync_to_async(CronJob.objects.filter(pk=job.pk).update)(next_run=timezone.now())
    assert await sync_to_async(dispatch.start_due)() == 1
    assert await queue.run_all() == ["succeeded"]

    assert not (folder_of(workspace, "ada") / "job.txt").exists()
    assert tool_results(llm.requests[1]) == [REFUSED]
    assert (await run_on("cron")).approve_tools == ["exec"]


async def test_the_announcing_turn_asks_in_the_chat_for_what_waited_when_it_spawned(
    llm: ScriptedLLM, ada: User, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = hold_queue(monkeypatch)
    await chat_where_exec_waits("web:c6", ada)
    llm.tool_call("spawn", {"task": "Look around", "label": "looker"}).reply("Started.")
    await run_turn(SessionRef("web:c6", ada), "look around later", channel="web")
    # The chat lets exec run again: what the sub-agent carries still waits for a yes.
    await chat_where_exec_waits_no_more("web:c6", ada)

    llm.reply("Nothing to see.")  # the sub-agent
    llm.tool_call("exec", {"command": "touch told.txt"})  # the announcing turn
    assert await queue.run_all() == ["succeeded"]

    told = await run_on("system", session__key="web:c6")
    assert told.status == "waiting"  # for a person in the chat, not refused
    pending = await sync_to_async(list)(
        Approval.objects.filter(run=told).values_list("name", "status")
    )
    assert pending == [("exec", "pending")]
    assert not (folder_of(workspace, "ada") / "told.txt").exists()
