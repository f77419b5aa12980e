"""A team chat's room: the team's folder, bootstrap files, skills and memory, whichever
member writes; and a member's personal chats, which reach none of it unless the operator
says so (AGENT_TEAM_FILES_IN_PERSONAL_CHATS)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User

from agent.turn import SessionRef, run_turn
from sessions_app import memory as memories
from sessions_app import services as sessions
from sessions_app.models import Memory, Run
from teams_app import services as teams
from tests.llm_server import ScriptedLLM

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]

SAVED = {"history_entry": "We chose the pump P-7.", "memory_update": "The ops pump is P-7."}


@pytest.fixture(autouse=True)
def inline_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("django_q.conf.Conf.SYNC", True)


@pytest.fixture
def ops() -> dict[str, Any]:
    ada = User.objects.create_user("ada", password="pw-ada-123")
    bob = User.objects.create_user("bob", password="pw-bob-123")
    team = teams.create_team(slug="ops")
    teams.set_members(team=team, users=[ada, bob])
    return {"ada": ada, "bob": bob, "team": team}


def team_chat(team: Any) -> SessionRef:
    session = sessions.create_team_chat(team=team.group)
    return SessionRef(session.key)


async def as_member(ops: dict[str, Any], name: str) -> SessionRef:
    session = await sync_to_async(sessions.create_team_chat)(team=ops["team"].group)
    return SessionRef(session.key, owner=ops[name])


async def test_what_the_team_taught_one_chat_the_next_one_knows(ops, llm: ScriptedLLM) -> None:
    first = await as_member(ops, "ada")
    llm.reply("Noted: P-7.")
    await run_turn(first, "our pump is P-7", channel="web")
    llm.tool_call("save_memory", SAVED)
    assert "archived" in (await run_turn(first, "/new", channel="web")).text

    team_memory = await sync_to_async(memories.long_term_memory)(
        owner_id=None, team_id=ops["team"].group_id
    )
    assert team_memory == SAVED["memory_update"]
    assert await sync_to_async(memories.long_term_memory)(owner_id=ops["ada"].pk) == ""

    second = SessionRef((await as_member(ops, "bob")).key, owner=ops["bob"])
    llm.reply("P-7.")
    await run_turn(second, "which pump?", channel="web")
    assert "The ops pump is P-7." in llm.requests[-1]["messages"][0]["content"]

    # Bob's own chats know nothing of it.
    llm.reply("I do not know.")
    await run_turn(SessionRef("web:mine", owner=ops["bob"]), "which pump?", channel="web")
    assert "P-7" not in llm.requests[-1]["messages"][0]["content"]


async def test_the_summary_of_a_team_chat_is_paid_by_the_member_who_sent_last(
    ops, llm: ScriptedLLM
) -> None:
    chat = await as_member(ops, "bob")
    llm.reply("ok")
    await run_turn(chat, "hello", channel="web")
    llm.tool_call("save_memory", SAVED)
    await run_turn(chat, "/new", channel="web")
    entry = await sync_to_async(Memory.objects.get)(session__key=chat.key)
    assert entry.team_id == ops["team"].group_id and entry.owner_id is None


async def test_the_team_folders_files_come_after_the_operators(
    ops, llm: ScriptedLLM, workspace: Path
) -> None:
    (workspace / "AGENTS.md").write_text("Operator rules.")
    folder = workspace / "teams" / "ops"
    (folder / "skills" / "pumps").mkdir(parents=True)
    (folder / "AGENTS.md").write_text("Ops rules: page the on-call.")
    (folder / "skills" / "pumps" / "SKILL.md").write_text(
        "---\nname: pumps\ndescription: How the ops team restarts pumps\n---\nRestart them."
    )
    own = workspace / "users" / "ada"
    own.mkdir(parents=True)
    (own / "AGENTS.md").write_text("Ada's private rules.")

    llm.reply("ok")
    await run_turn(await as_member(ops, "ada"), "hi", channel="web")
    system = llm.requests[-1]["messages"][0]["content"]
    assert system.index("Operator rules.") < system.index("Ops rules: page the on-call.")
    assert "the team ops's" in system and "How the ops team restarts pumps" in system
    assert "Ada's private rules." not in system


async def test_personal_chats_read_the_teams_files_only_when_the_operator_says_so(
    ops, llm: ScriptedLLM, workspace: Path, settings: Any
) -> None:
    folder = workspace / "teams" / "ops"
    folder.mkdir(parents=True)
    (folder / "AGENTS.md").write_text("Ops rules: page the on-call.")
    mine = SessionRef("web:mine", owner=ops["ada"])

    llm.reply("ok")
    await run_turn(mine, "hi", channel="web")
    assert "Ops rules" not in llm.requests[-1]["messages"][0]["content"]

    settings.AGENT_TEAM_FILES_IN_PERSONAL_CHATS = True
    llm.reply("ok")
    await run_turn(mine, "hi again", channel="web")
    system = llm.requests[-1]["messages"][0]["content"]
    assert "Ops rules: page the on-call." in system and "the team ops's" in system


async def test_a_team_chat_schedules_no_jobs(ops, llm: ScriptedLLM) -> None:
    llm.reply("ok")
    await run_turn(await as_member(ops, "ada"), "hi", channel="web")
    offered = {tool["function"]["name"] for tool in llm.requests[-1]["tools"]}
    assert "cron" not in offered and "read_file" in offered


async def test_a_team_chats_sub_agent_works_in_the_team_folder_as_the_sender(
    ops, llm: ScriptedLLM, workspace: Path
) -> None:
    chat = await as_member(ops, "bob")
    llm.tool_call("subagent", {"task": "write the notes", "label": "notes"})
    llm.tool_call("write_file", {"path": "notes.md", "content": "from the sub-agent"})
    llm.reply("Done.")
    llm.reply("The notes are written.")
    result = await run_turn(chat, "have a sub-agent write notes", channel="web")
    assert result.success
    assert (workspace / "teams" / "ops" / "notes.md").read_text() == "from the sub-agent"
    sub = await sync_to_async(Run.objects.select_related("session").get)(channel="subagent")
    assert sub.author_id == ops["bob"].pk and sub.session.team_id == ops["team"].group_id
    assert not (workspace / "users" / "bob" / "notes.md").exists()


def test_a_deleted_teams_folder_is_put_aside_and_a_new_team_of_its_name_starts_empty(
    workspace: Path,
) -> None:
    team = teams.create_team(slug="ops")
    folder = workspace / "teams" / "ops"
    folder.mkdir(parents=True)
    (folder / "secrets.md").write_text("the old team's")
    teams.delete_team(team=team)
    assert not folder.exists()
    [kept] = (workspace / "teams" / ".deleted").iterdir()
    assert kept.name.startswith("ops~") and (kept / "secrets.md").read_text() == "the old team's"
