"""Tools that wait for a person, through the turn package: a turn that asks for one waits
as state in the database, holding nothing; the answers (or their time running out) let it
go on from what it had said, and the model reads the person's no."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User

from agent.events import Collector
from agent.turn import SessionRef, answer_approval, resume_turn, run_turn
from sessions_app.models import Approval, Message, Run
from tests.conftest import folder_of
from tests.llm_server import ScriptedLLM

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]


def tool_results(request: dict[str, Any]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in request["messages"] if m["role"] == "tool"}


async def test_a_call_waits_then_runs_once_allowed(
    llm: ScriptedLLM, settings: Any, workspace: Path
) -> None:
    settings.AGENT_APPROVE_TOOLS = ["write_file"]
    ada = await sync_to_async(User.objects.create_user)("ada", password="pw-ada-123")
    llm.tool_calls([("list_dir", {"path": "."}), ("write_file", {"path": "a.txt", "content": "A"})])
    llm.reply("Written.")
    events = Collector()
    result = await run_turn(
        SessionRef("web:w1", owner=ada), "write a.txt", channel="web", emit=events
    )
    assert result.status == "waiting"
    assert result.pending == [
        {"id": "call_2", "name": "write_file", "arguments": {"path": "a.txt", "content": "A"}}
    ]
    assert len(llm.requests) == 1
    assert [e.to_dict()["type"] for e in events.events][-2:] == [
        "approval_request",
        "thinking_finished",
    ]
    assert not (folder_of(workspace, "ada") / "a.txt").exists()
    run = await sync_to_async(Run.objects.get)(pk=result.run_id)
    assert run.status == "waiting"

    answer = await answer_approval(owner=ada, run_id=run.pk, call_id="call_2", allow=True)
    assert answer.ready
    resumed = await resume_turn(run.pk)
    assert resumed is not None and resumed.status == "succeeded" and resumed.text == "Written."
    assert (folder_of(workspace, "ada") / "a.txt").read_text() == "A"
    results = tool_results(llm.requests[-1])
    assert results["call_2"].startswith("Wrote")
    roles = await sync_to_async(
        lambda: list(
            Message.objects.filter(run_id=run.pk).order_by("seq").values_list("role", flat=True)
        )
    )()
    assert roles == ["user", "assistant", "tool", "tool", "assistant"]
    run = await sync_to_async(Run.objects.get)(pk=result.run_id)
    assert run.status == "succeeded" and run.iterations == 2
    # Its trace runs across the wait: what came before it, then what came after.
    assert [(step["kind"], step["name"]) for step in run.trace] == [
        ("model", "openai/scripted"),
        ("tool", "list_dir"),
        ("tool", "write_file"),
        ("model", "openai/scripted"),
    ]


async def test_a_declined_call_tells_the_model(llm: ScriptedLLM, settings: Any) -> None:
    settings.AGENT_APPROVE_TOOLS = ["exec"]
    ada = await sync_to_async(User.objects.create_user)("ada", password="pw-ada-123")
    llm.tool_call("exec", {"command": "rm -rf build"})
    llm.reply("Understood, I left it.")
    result = await run_turn(SessionRef("web:w2", owner=ada), "clean up", channel="web")
    assert result.status == "waiting"
    await answer_approval(
        owner=ada, run_id=result.run_id, call_id=result.pending[0]["id"], allow=False
    )
    resumed = await resume_turn(result.run_id)
    assert resumed is not None and resumed.text == "Understood, I left it."
    (declined,) = tool_results(llm.requests[-1]).values()
    assert declined.startswith("Error: the user declined exec(command='rm -rf build')")
    approvals = await sync_to_async(
        lambda: list(Approval.objects.values_list("status", flat=True))
    )()
    assert approvals == ["declined"]


async def test_users_sessions_and_skills_add_tools_that_wait(
    llm: ScriptedLLM, settings: Any, workspace: Path
) -> None:
    from sessions_app import approvals, services
    from skills_app.models import Skill

    ada = await sync_to_async(User.objects.create_user)("ada", password="pw-ada-123")
    skill = workspace / "skills" / "deploy" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: deploy\ndescription: Deploys.\napprove_tools: [glob]\n---\nGo.")
    await sync_to_async(Skill.objects.create)(
        name="fetching", description="Fetches.", content="Fetch.", approve_tools=["web_*"]
    )
    await sync_to_async(approvals.set_user_approve_tools)(user=ada, tools=["list_dir"])
    session = await sync_to_async(services.get_or_create_session)(key="web:add", owner=ada)
    await sync_to_async(services.set_session_tools)(
        session=session, approve_tools=["read_file"], allowed_tools=["web_fetch"]
    )
    llm.tool_calls(
        [
            ("edit_file", {"path": "a", "old_text": "x", "new_text": "y"}),  # runs
            ("list_dir", {"path": "."}),  # the user's
            ("read_file", {"path": "a"}),  # the session's
            ("glob", {"pattern": "*"}),  # the workspace skill's
            ("web_search", {"query": "q"}),  # the database skill's
            ("web_fetch", {"url": "http://127.0.0.1:9/"}),  # allowed "always" here
        ]
    )
    result = await run_turn(SessionRef("web:add", owner=ada), "go", channel="web")
    assert result.status == "waiting"
    assert [call["name"] for call in result.pending] == [
        "list_dir",
        "read_file",
        "glob",
        "web_search",
    ]


async def test_always_allows_the_runs_other_calls_of_the_tool_and_the_session(
    llm: ScriptedLLM, settings: Any
) -> None:
    settings.AGENT_APPROVE_TOOLS = ["list_dir", "glob"]
    ada = await sync_to_async(User.objects.create_user)("ada", password="pw-ada-123")
    llm.tool_calls(
        [("list_dir", {"path": "."}), ("glob", {"pattern": "*"}), ("list_dir", {"path": "."})]
    )
    llm.reply("Listed.")
    result = await run_turn(SessionRef("web:al", owner=ada), "list", channel="web")
    first, second, third = (call["id"] for call in result.pending)

    answer = await answer_approval(
        owner=ada, run_id=result.run_id, call_id=first, allow=True, always=True
    )
    assert not answer.ready  # glob still waits; the second list_dir was allowed with it
    statuses = await sync_to_async(
        lambda: dict(Approval.objects.values_list("call_id", "status"))
    )()
    assert statuses == {first: "allowed", second: "pending", third: "allowed"}
    assert (await resume_turn(result.run_id)) is None  # not while a call waits
    answer = await answer_approval(owner=ada, run_id=result.run_id, call_id=second, allow=False)
    assert answer.ready
    resumed = await resume_turn(result.run_id)
    assert resumed is not None and resumed.status == "succeeded"
    assert (await resume_turn(result.run_id)) is None  # once
    said = tool_results(llm.requests[-1])
    assert said[second].startswith("Error: the user declined glob(pattern='*')")
    assert said[first] == said[third] == "Directory '.' is empty."


async def test_a_stop_that_comes_as_the_turn_begins_to_wait_ends_it(
    llm: ScriptedLLM, settings: Any
) -> None:
    from agent.turn.approvals import STOPPED_RESULT
    from sessions_app import approvals, services
    from sessions_app import runs as run_records

    ada = await sync_to_async(User.objects.create_user)("ada", password="pw-ada-123")

    @sync_to_async
    def park_a_stopped_run() -> tuple[Any, Run]:
        session = services.get_or_create_session(key="web:race", owner=ada)
        run = run_records.start_new_run(session=session, channel="web", prompt="go", model="m")
        call = {"id": "c1", "type": "function", "function": {"name": "exec", "arguments": "{}"}}
        services.add_messages(
            session=session,
            run=run,
            messages=[
                services.NewMessage({"role": "user", "content": "go"}, None, 1),
                services.NewMessage(
                    {"role": "assistant", "content": None, "tool_calls": [call]}, None, 2
                ),
            ],
        )
        Run.objects.filter(pk=run.pk).update(cancel_requested=True)  # the stop, just now
        parked = approvals.park_run(
            run=run,
            pending=[approvals.PendingCall("c1", "exec", {}, 0)],
            timeout=60,
            stopped_result=STOPPED_RESULT,
            iterations=1,
            tools_used=[],
            usage={},
            cost=None,
        )
        return parked, Run.objects.get(pk=run.pk)

    parked, run = await park_a_stopped_run()
    assert parked is None
    assert run.status == "cancelled"
    messages = await sync_to_async(
        lambda: list(Message.objects.filter(run=run).order_by("seq").values_list("role", "content"))
    )()
    assert messages[-1] == ("tool", STOPPED_RESULT)
    assert await sync_to_async(
        lambda: list(Approval.objects.values_list("status", flat=True))
    )() == ["cancelled"]


async def test_a_waiting_turn_goes_with_its_session(llm: ScriptedLLM, settings: Any) -> None:
    from agent.turn import ApprovalNotFound
    from sessions_app import services
    from sessions_app.models import Session

    settings.AGENT_APPROVE_TOOLS = ["exec"]
    ada = await sync_to_async(User.objects.create_user)("ada", password="pw-ada-123")
    llm.tool_call("exec", {"command": "ls"})
    result = await run_turn(SessionRef("web:gone", owner=ada), "list", channel="web")
    assert result.status == "waiting"
    session = await sync_to_async(Session.objects.get)(key="web:gone")
    await sync_to_async(services.delete_session)(session=session)

    with pytest.raises(ApprovalNotFound):
        await answer_approval(
            owner=ada, run_id=result.run_id, call_id=result.pending[0]["id"], allow=True
        )
    assert await resume_turn(result.run_id) is None
    assert not await sync_to_async(Approval.objects.exists)()


async def test_a_waiting_turn_that_is_stopped_counts_what_it_used(
    llm: ScriptedLLM, settings: Any
) -> None:
    """Its model calls before the wait go into the daily ledger (and the budget) as any
    ended run's do."""
    from sessions_app.models import DailyUsage

    settings.AGENT_APPROVE_TOOLS = ["exec"]
    ada = await sync_to_async(User.objects.create_user)("ada", password="pw-ada-123")
    llm.tool_call("exec", {"command": "ls"})
    result = await run_turn(SessionRef("web:spent", owner=ada), "list", channel="web")
    assert result.status == "waiting"
    assert not await sync_to_async(DailyUsage.objects.exists)()

    stopped = await run_turn(SessionRef("web:spent", owner=ada), "/stop", channel="web")
    assert stopped.text == "Stopped 1 task."
    (line,) = await sync_to_async(list)(DailyUsage.objects.filter(owner=ada))
    assert line.runs == 1 and line.total_tokens == result.usage["total_tokens"] > 0
    run = await sync_to_async(Run.objects.get)(pk=result.run_id)
    assert run.status == "cancelled" and run.counted


async def test_a_server_that_numbers_each_answers_calls_afresh_waits_and_goes_on_each_time(
    llm: ScriptedLLM, settings: Any, workspace: Path
) -> None:
    """Some servers number every answer's calls from call_0: the second answer's call is
    given an id of its own, so that it can wait for a person as the first did."""
    settings.AGENT_APPROVE_TOOLS = ["write_file"]
    ada = await sync_to_async(User.objects.create_user)("ada", password="pw-ada-123")
    llm.tool_calls([("write_file", {"path": "a.txt", "content": "A"})], ids=["call_0"])
    llm.tool_calls([("write_file", {"path": "b.txt", "content": "B"})], ids=["call_0"])
    llm.reply("Both written.")

    first = await run_turn(SessionRef("web:w1", owner=ada), "write two", channel="web")
    assert first.status == "waiting" and [c["id"] for c in first.pending] == ["call_0"]
    run_id = UUID(first.run_id)
    await answer_approval(owner=ada, run_id=run_id, call_id="call_0", allow=True)
    second = await resume_turn(run_id)

    assert second is not None and second.status == "waiting"
    assert [c["id"] for c in second.pending] == ["call_0_2"]
    await answer_approval(owner=ada, run_id=run_id, call_id="call_0_2", allow=True)
    done = await resume_turn(run_id)

    assert done is not None and (done.status, done.text) == ("succeeded", "Both written.")
    assert (folder_of(workspace, "ada") / "b.txt").read_text() == "B"
    assert set(tool_results(llm.requests[-1])) == {"call_0", "call_0_2"}
