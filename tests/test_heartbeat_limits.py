"""The heartbeat keeps to the limits of the turn that last wrote the user's HEARTBEAT.md:
what a task limited to some tools, or a chat where exec waits for a yes, writes there runs
later with no more than that turn could do; a turn without limits that writes it lifts them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User

from agent.job_functions import run_user_heartbeat
from agent.turn import SessionRef, TurnOptions, get_or_create_session, run_turn
from sessions_app.models import Session
from tests.conftest import folder_of
from tests.jobs import as_worker
from tests.llm_server import ScriptedLLM

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]

TASKS = {"path": "HEARTBEAT.md", "content": "- [ ] run touch marker\n"}


@pytest.fixture
def bob(db: None) -> User:
    return User.objects.create_user("bob", password="pw")


def offered(request: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in request.get("tools") or ()]


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


async def beat_with_exec(llm: ScriptedLLM, bob: User) -> dict[str, Any]:
    """One heartbeat of bob's whose model runs `touch marker`; the request it answered."""
    llm.tool_call("exec", {"command": "touch marker"}).reply("Done.")
    await as_worker(run_user_heartbeat)(bob.pk)
    return llm.requests[-1]


async def note_tasks_with_write_file_only(llm: ScriptedLLM, bob: User) -> None:
    """A task of bob's, limited to write_file, writes the heartbeat's tasks."""
    llm.tool_call("write_file", TASKS).reply("Noted.")
    limited = TurnOptions(tools=("write_file",))
    await run_turn(SessionRef("api:t", bob), "note it", channel="api", options=limited)


async def test_the_heartbeat_keeps_to_the_tools_of_the_task_that_wrote_its_file(
    llm: ScriptedLLM, bob: User, workspace: Path
) -> None:
    await note_tasks_with_write_file_only(llm, bob)

    answered = await beat_with_exec(llm, bob)

    assert offered(llm.requests[-2]) == ["write_file"]
    assert tool_results(answered)[-1].startswith("Error: unknown tool 'exec'")
    assert not (folder_of(workspace, "bob") / "marker").exists()


async def test_the_heartbeat_refuses_what_waited_in_the_chat_that_wrote_its_file(
    llm: ScriptedLLM, bob: User, workspace: Path
) -> None:
    session = await get_or_create_session(key="web:careful", owner=bob)
    session.approve_tools = ["exec"]
    await sync_to_async(session.save)()
    llm.tool_call("write_file", TASKS).reply("Noted.")
    await run_turn(SessionRef("web:careful", bob), "note it", channel="web")

    answered = await beat_with_exec(llm, bob)

    assert "exec" in offered(llm.requests[-2])
    assert "there is no one to ask" in tool_results(answered)[-1]
    assert not (folder_of(workspace, "bob") / "marker").exists()


async def test_a_turn_without_limits_that_writes_the_file_lifts_them(
    llm: ScriptedLLM, bob: User, workspace: Path
) -> None:
    await note_tasks_with_write_file_only(llm, bob)
    llm.tool_call("edit_file", {"path": "HEARTBEAT.md", "old_text": "run", "new_text": "run:"})
    llm.reply("Edited.")
    await run_turn(SessionRef("web:free", bob), "edit it", channel="web")

    answered = await beat_with_exec(llm, bob)

    assert tool_results(answered)[-1].endswith("Exit code: 0")
    assert (folder_of(workspace, "bob") / "marker").exists()
    assert await sync_to_async(Session.objects.filter(key="heartbeat", owner=bob).exists)()


async def test_a_command_that_writes_the_file_passes_on_its_turns_limits(
    llm: ScriptedLLM, bob: User, workspace: Path
) -> None:
    """exec wrote the file unseen: the heartbeat then ran with every tool."""
    write = "printf -- '- [ ] write the note\\n' > HEARTBEAT.md"
    llm.tool_call("exec", {"command": write}).reply("Noted.")
    limited = TurnOptions(tools=("exec",))
    await run_turn(SessionRef("api:t", bob), "note it", channel="api", options=limited)

    llm.tool_call("write_file", {"path": "note.txt", "content": "x"}).reply("Done.")
    await as_worker(run_user_heartbeat)(bob.pk)

    assert offered(llm.requests[-2]) == ["exec"]
    assert tool_results(llm.requests[-1])[-1].startswith("Error: unknown tool 'write_file'")
    assert not (folder_of(workspace, "bob") / "note.txt").exists()


async def test_a_write_through_a_link_the_file_is_passes_on_its_turns_limits(
    llm: ScriptedLLM, bob: User, workspace: Path
) -> None:
    folder = folder_of(workspace, "bob")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "notes.md").write_text("")
    (folder / "HEARTBEAT.md").symlink_to("notes.md")
    llm.tool_call("write_file", {**TASKS, "path": "notes.md"}).reply("Noted.")
    limited = TurnOptions(tools=("write_file",))
    await run_turn(SessionRef("api:t", bob), "note it", channel="api", options=limited)

    answered = await beat_with_exec(llm, bob)

    assert offered(llm.requests[-2]) == ["write_file"]
    assert tool_results(answered)[-1].startswith("Error: unknown tool 'exec'")
    assert not (folder / "marker").exists()


async def test_a_turn_without_limits_that_only_sees_a_change_lifts_nothing(
    llm: ScriptedLLM, bob: User, workspace: Path
) -> None:
    """A command of a turn without limits changes the file: which turn wrote what is in it
    cannot be told, so the limits stay; a file tool's write of the file itself lifts them."""
    await note_tasks_with_write_file_only(llm, bob)
    llm.tool_call("exec", {"command": "touch HEARTBEAT.md"}).reply("Touched.")
    await run_turn(SessionRef("web:free", bob), "touch it", channel="web")

    answered = await beat_with_exec(llm, bob)

    assert tool_results(answered)[-1].startswith("Error: unknown tool 'exec'")
    assert not (folder_of(workspace, "bob") / "marker").exists()
