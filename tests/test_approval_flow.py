"""Tools that wait for a person, through the turn package: a turn that asks for one waits
as state in the database, holding nothing; the answers (or their time running out) let it
go on from what it had said, and the model reads the person's no."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
