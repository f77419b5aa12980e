"""Tools that wait for a person, through the chat's WebSocket: every tab of the chat is
asked, any of them answers, the card goes in all of them, and the turn goes on in the
process that took the answer. A tab that opens later is asked too; a stop or a new message
ends the wait; an answer that finds nothing to answer changes nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User

from agent import job_functions
from sessions_app.models import Approval, Message, Run, Session
from tests.conftest import folder_of
from tests.jobs import as_worker, hold_queue
from tests.llm_server import ScriptedLLM
from tests.ws import open_chat, receive_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]


@pytest.fixture(autouse=True)
def _write_file_waits(settings: Any) -> None:
    settings.AGENT_APPROVE_TOOLS = ["write_file"]


def results(request: dict[str, Any]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in request["messages"] if m["role"] == "tool"}


@sync_to_async
def run_of(key: str) -> Run:
    return Run.objects.filter(session__key=key).latest("created")


@sync_to_async
def statuses(key: str) -> list[str]:
    return list(
        Approval.objects.filter(run__session__key=key)
        .order_by("created")
        .values_list("status", flat=True)
    )


async def test_every_tab_is_asked_one_answers_and_the_card_goes_in_both(
    llm: ScriptedLLM, token: str, workspace: Path
) -> None:
    llm.tool_call("write_file", {"path": "a.txt", "content": "A"}).reply("Written.")
    first, _ = await open_chat("t1", token)
    second, _ = await open_chat("t1", token)

    await first.send_json_to({"type": "message", "content": "write a.txt"})
    asked = await receive_until(first, "approval_request")
    theirs = await receive_until(second, "approval_request")
    request = asked[-1]
    assert theirs[-1] == request
    assert request["name"] == "write_file"
    assert request["arguments"] == {"path": "a.txt", "content": "A"}
    assert request["run_id"] == asked[0]["run_id"]
    await receive_until(first, "thinking_finished")
    assert not (folder_of(workspace, "ada") / "a.txt").exists()
    run = await run_of("web:t1")
    assert run.status == "waiting"

    # The other tab answers: both hear it, and the turn goes on.
    await second.send_json_to({"type": "approve", "id": request["id"], "allow": True})
    for socket in (first, second):
        resolved = await receive_until(socket, "approval_resolved")
        assert resolved[-1] == {
            "type": "approval_resolved",
            "id": request["id"],
            "run_id": request["run_id"],
            "allow": True,
            "reason": "answered",
        }
    done = await receive_until(second, "message", role="assistant")
    assert done[-1]["content"] == "Written." and done[-1]["run_id"] == request["run_id"]
    assert any(f["type"] == "tool_result" and f["id"] == request["id"] for f in done)
    assert (await receive_until(first, "message", role="assistant"))[-1]["content"] == "Written."
    assert (folder_of(workspace, "ada") / "a.txt").read_text() == "A"
    assert results(llm.requests[-1])[request["id"]].startswith("Wrote")
    run = await run_of("web:t1")
    assert run.status == "succeeded" and run.text == "Written."
    for socket in (first, second):
        await socket.disconnect()


async def test_a_tab_that_opens_later_is_asked_and_may_decline(
    llm: ScriptedLLM, token: str
) -> None:
    llm.tool_call("write_file", {"path": "b.txt", "content": "B"}).reply("Left it.")
    socket, _ = await open_chat("t2", token)
    await socket.send_json_to({"type": "message", "content": "write b.txt"})
    request = (await receive_until(socket, "approval_request"))[-1]
    await socket.disconnect()

    socket, history = await open_chat("t2", token)
    assert history["running"] is False
    assert await socket.receive_json_from(timeout=5) == request
    await socket.send_json_to({"type": "approve", "id": request["id"], "allow": False})
    done = await receive_until(socket, "message", role="assistant")
    assert done[-1]["content"] == "Left it."
    said = results(llm.requests[-1])[request["id"]]
    assert said.startswith("Error: the user declined write_file(path='b.txt', content='B')")
    assert await statuses("web:t2") == ["declined"]
    await socket.disconnect()


async def test_answers_that_find_nothing_to_answer_change_nothing(
    llm: ScriptedLLM, token: str, other_token: str
) -> None:
    llm.tool_call("write_file", {"path": "c.txt", "content": "C"}).reply("Done.")
    socket, _ = await open_chat("t3", token)
    await socket.send_json_to({"type": "message", "content": "write c.txt"})
    request = (await receive_until(socket, "approval_request"))[-1]
    await receive_until(socket, "thinking_finished")

    for bad in (
        {"type": "approve", "id": request["id"]},
        {"type": "approve", "id": request["id"], "allow": "yes"},
        {"type": "approve", "id": 7, "allow": True},
        {"type": "approve", "id": request["id"], "allow": True, "always": "sure"},
        {"type": "approve", "id": "x" * 200, "allow": True},
    ):
        await socket.send_json_to(bad)
        error = await socket.receive_json_from(timeout=5)
        assert error["type"] == "error" and '"type": "approve"' in error["message"]
    await socket.send_json_to({"type": "approve", "id": "call_999", "allow": True})
    error = await socket.receive_json_from(timeout=5)
    assert error["type"] == "error" and "call_999" in error["message"]

    # Bob's chat of the same id is his own: Ada's call is not there to answer.
    bobs, _ = await open_chat("t3", other_token)
    await bobs.send_json_to({"type": "approve", "id": request["id"], "allow": True})
    error = await bobs.receive_json_from(timeout=5)
    assert error["type"] == "error"
    await bobs.disconnect()
    assert await statuses("web:t3") == ["pending"]
    assert len(llm.requests) == 1

    await socket.send_json_to({"type": "approve", "id": request["id"], "allow": True})
    await receive_until(socket, "message", role="assistant")
    # A second answer to the call: it was answered, and its turn has ended.
    await socket.send_json_to({"type": "approve", "id": request["id"], "allow": False})
    error = await socket.receive_json_from(timeout=5)
    assert error["type"] == "error" and "already answered" in error["message"]
    assert await statuses("web:t3") == ["allowed"]
    assert len(llm.requests) == 2
    await socket.disconnect()


async def test_two_tabs_answering_at_once_resume_the_turn_once(
    llm: ScriptedLLM, token: str
) -> None:
    llm.tool_calls(
        [
            ("write_file", {"path": "d.txt", "content": "D"}),
            ("write_file", {"path": "e.txt", "content": "E"}),
        ]
    ).reply("Both written.")
    first, _ = await open_chat("t4", token)
    second, _ = await open_chat("t4", token)
    await first.send_json_to({"type": "message", "content": "write both"})
    await receive_until(first, "thinking_finished")
    pending = [
        f
        for f in await receive_until(second, "thinking_finished")
        if f["type"] == "approval_request"
    ]
    assert len(pending) == 2

    # The same call from both tabs, and each tab the other call, all at once.
    d, e = pending[0]["id"], pending[1]["id"]
    await asyncio.gather(
        first.send_json_to({"type": "approve", "id": d, "allow": True}),
        second.send_json_to({"type": "approve", "id": d, "allow": True}),
        first.send_json_to({"type": "approve", "id": e, "allow": True}),
        second.send_json_to({"type": "approve", "id": e, "allow": True}),
    )
    frames = await receive_until(first, "message", role="assistant")
    frames += await receive_until(second, "message", role="assistant")
    await asyncio.sleep(0.5)
    errors = [f for f in frames if f["type"] == "error"]
    assert len(errors) == 2 and all("already answered" in f["message"] for f in errors)
    assert len(llm.requests) == 2
    assert [f["type"] for f in frames].count("thinking_started") == 2  # one run, seen twice
    run = await run_of("web:t4")
    assert run.status == "succeeded" and run.text == "Both written."
    roles = await sync_to_async(
        lambda: list(Message.objects.filter(run=run).order_by("seq").values_list("role", flat=True))
    )()
    assert roles == ["user", "assistant", "tool", "tool", "assistant"]
    for socket in (first, second):
        await socket.disconnect()


async def test_stop_ends_a_waiting_turn(llm: ScriptedLLM, token: str) -> None:
    llm.tool_call("write_file", {"path": "f.txt", "content": "F"})
    socket, _ = await open_chat("t5", token)
    await socket.send_json_to({"type": "message", "content": "write f.txt"})
    request = (await receive_until(socket, "approval_request"))[-1]
    await receive_until(socket, "thinking_finished")

    await socket.send_json_to({"type": "stop"})
    # The stop's answer and the card's end arrive in either order.
    frames: list[dict[str, Any]] = []
    while not {"stopped", "approval_resolved"} <= {f["type"] for f in frames}:
        frames.append(await socket.receive_json_from(timeout=5))
    assert next(f for f in frames if f["type"] == "stopped")["message"] == "Stopped 1 task."
    resolved = next(f for f in frames if f["type"] == "approval_resolved")
    assert resolved["id"] == request["id"] and resolved["reason"] == "stopped"
    assert not resolved["allow"]
    run = await run_of("web:t5")
    assert run.status == "cancelled"
    assert await statuses("web:t5") == ["cancelled"]

    # The stopped call has its answer in the history the model reads next.
    llm.reply("OK.")
    await socket.send_json_to({"type": "message", "content": "never mind"})
    await receive_until(socket, "message", role="assistant", content="OK.")
    assert results(llm.requests[-1])[request["id"]].startswith("Error: the turn was stopped")
    await socket.send_json_to({"type": "approve", "id": request["id"], "allow": True})
    assert (await socket.receive_json_from(timeout=5))["type"] == "error"
    await socket.disconnect()


async def test_a_new_message_ends_the_wait_and_always_allows_the_tool_for_the_chat(
    llm: ScriptedLLM, token: str, workspace: Path
) -> None:
    llm.tool_call("write_file", {"path": "g.txt", "content": "G"})
    socket, _ = await open_chat("t6", token)
    await socket.send_json_to({"type": "message", "content": "write g.txt"})
    first = (await receive_until(socket, "approval_request"))[-1]

    llm.tool_call("write_file", {"path": "h.txt", "content": "H"}).reply("Wrote h.")
    await socket.send_json_to({"type": "message", "content": "no, write h.txt instead"})
    frames = await receive_until(socket, "approval_request")
    second = frames[-1]
    if "approval_resolved" not in [f["type"] for f in frames]:
        # Told to every tab through the group, which Redis may deliver after the request
        # this socket's own turn sends it directly.
        frames += await receive_until(socket, "approval_resolved")
    superseded = next(f for f in frames if f["type"] == "approval_resolved")
    assert superseded["id"] == first["id"] and superseded["reason"] == "superseded"
    said = results(llm.requests[-1])[first["id"]]
    assert said.startswith("Error: the user sent a new message instead")
    assert await statuses("web:t6") == ["cancelled", "pending"]

    await socket.send_json_to(
        {"type": "approve", "id": second["id"], "allow": True, "always": True}
    )
    resolved = (await receive_until(socket, "approval_resolved"))[-1]
    assert resolved["always"] is True
    await receive_until(socket, "message", role="assistant", content="Wrote h.")
    session = await sync_to_async(Session.objects.get)(key="web:t6")
    assert session.allowed_tools == ["write_file"]

    # From now on write_file runs in this chat without asking.
    llm.tool_call("write_file", {"path": "i.txt", "content": "I"}).reply("Wrote i.")
    await socket.send_json_to({"type": "message", "content": "write i.txt"})
    frames = await receive_until(socket, "message", role="assistant", content="Wrote i.")
    assert "approval_request" not in [f["type"] for f in frames]
    assert (folder_of(workspace, "ada") / "i.txt").read_text() == "I"
    await socket.disconnect()


async def test_an_unanswered_call_times_out_and_the_worker_goes_on(
    llm: ScriptedLLM, token: str, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.AGENT_APPROVAL_TIMEOUT = 1
    queue = hold_queue(monkeypatch)
    llm.tool_call("write_file", {"path": "j.txt", "content": "J"}).reply("No answer came.")
    socket, _ = await open_chat("t7", token)
    await socket.send_json_to({"type": "message", "content": "write j.txt"})
    request = (await receive_until(socket, "approval_request"))[-1]
    await receive_until(socket, "thinking_finished")

    assert await as_worker(job_functions.settle_approvals)() == 0  # not yet
    await asyncio.sleep(1.1)
    assert await as_worker(job_functions.settle_approvals)() == 1
    assert queue.names() == ["resume_run"]
    resolved = (await receive_until(socket, "approval_resolved"))[-1]
    assert resolved["id"] == request["id"] and resolved["reason"] == "timeout"
    assert await as_worker(job_functions.settle_approvals)() == 0  # queued once
    assert await queue.run_all() == ["succeeded"]
    done = await receive_until(socket, "message", role="assistant")
    assert done[-1]["content"] == "No answer came."
    said = results(llm.requests[-1])[request["id"]]
    assert said.startswith("Error: the user declined write_file(")
    assert "no answer came within 1 second, so it did not run" in said
    assert await statuses("web:t7") == ["expired"]
    await socket.disconnect()


async def test_a_cron_turn_has_no_one_to_ask(llm: ScriptedLLM, settings: Any) -> None:
    from agent.turn import run_turn

    ada = await sync_to_async(User.objects.create_user)("cora", password="pw-cora-123")
    llm.tool_call("write_file", {"path": "k.txt", "content": "K"}).reply("Could not write.")
    from agent.turn import SessionRef

    result = await run_turn(SessionRef("cron:9", owner=ada), "write k.txt", channel="cron")
    assert result.status == "succeeded"
    (said,) = results(llm.requests[-1]).values()
    assert said.startswith("Error: write_file waits for a person's approval")
