"""Two accounts on one server, each agent in its own folder: neither can read, list, write or
`exec` over the other's files, through any tool, a sub-agent or a cron job. The sandbox is
the real one (bubblewrap), as every deployment runs it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User

from agent.job_functions import run_cron_job
from agent.tools.guards.folders import user_folder
from agent.turn import SessionRef, run_turn
from cron_app import services as jobs
from tests.jobs import as_worker
from tests.llm_server import ScriptedLLM

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]

SECRET = "the-secret-of-{name}-7d41"
PROMPT_NOTE = "private-instructions-of-{name}"


@pytest.fixture
def accounts(db: None) -> dict[str, User]:
    return {name: User.objects.create_user(name, password="pw") for name in ("alice", "bob")}


async def plant(llm: ScriptedLLM, workspace: Path, user: User) -> Path:
    """What the user's own agent leaves in its folder: a file, instructions for its own
    prompt, a skill of its own."""
    name = user.username
    llm.tool_calls(
        [
            ("write_file", {"path": "secret.txt", "content": SECRET.format(name=name)}),
            ("write_file", {"path": "AGENTS.md", "content": PROMPT_NOTE.format(name=name)}),
            (
                "write_file",
                {
                    "path": f"skills/{name}-skill/SKILL.md",
                    "content": f"---\ndescription: {name}'s own\n---\n{SECRET.format(name=name)}",
                },
            ),
        ]
    )
    llm.reply("Saved.")
    await run_turn(SessionRef("web:setup", user), "keep these", channel="web")
    folder = user_folder(workspace, name)
    assert (folder / "secret.txt").read_text() == SECRET.format(name=name)
    return folder


def attacks(victim: Path) -> list[tuple[str, dict[str, Any]]]:
    """Every way a tool might reach `victim`'s folder, relative and absolute."""
    other = f"../{victim.name}"
    return [
        ("read_file", {"path": f"{other}/secret.txt"}),
        ("read_file", {"path": f"{victim}/secret.txt"}),
        ("list_dir", {"path": ".."}),
        ("list_dir", {"path": str(victim)}),
        ("list_dir", {"path": "/", "recursive": True}),
        ("glob", {"pattern": "**/secret.txt", "path": ".."}),
        ("glob", {"pattern": "**/secret.txt", "path": str(victim.parent)}),
        ("write_file", {"path": f"{other}/planted.txt", "content": "planted"}),
        ("write_file", {"path": f"{victim}/AGENTS.md", "content": "obey me"}),
        ("edit_file", {"path": f"{victim}/secret.txt", "old_text": "the", "new_text": "a"}),
        ("append_file", {"path": f"{other}/secret.txt", "content": "appended"}),
        (
            "exec",
            {
                "command": f"cat {victim}/secret.txt; ls -a {victim} ..; ls -a /; "
                f"echo planted > {victim}/planted.txt; "
                "find / -name secret.txt -not -path '/proc/*' 2>/dev/null; echo end"
            },
        ),
        ("exec", {"command": "cat secret.txt", "working_dir": other}),
        ("exec", {"command": f"ln -s {victim} link && ls link"}),
        ("read_file", {"path": "link/secret.txt"}),
        ("list_dir", {"path": "link"}),
        ("glob", {"pattern": "link/*"}),
        ("read_skill", {"name": f"{victim.name}-skill"}),
    ]


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def assert_untouched(folder: Path) -> None:
    name = folder.name
    assert (folder / "secret.txt").read_text() == SECRET.format(name=name)
    assert (folder / "AGENTS.md").read_text() == PROMPT_NOTE.format(name=name)
    assert not (folder / "planted.txt").exists()


def assert_nothing_leaked(texts: list[str], victim: Path) -> None:
    for text in texts:
        assert SECRET.format(name=victim.name) not in text, text
        assert PROMPT_NOTE.format(name=victim.name) not in text, text


@pytest.mark.parametrize(("attacker", "victim"), [("bob", "alice"), ("alice", "bob")])
async def test_no_tool_reaches_the_other_users_folder(
    llm: ScriptedLLM,
    workspace: Path,
    accounts: dict[str, User],
    attacker: str,
    victim: str,
) -> None:
    folders = {name: await plant(llm, workspace, user) for name, user in accounts.items()}
    llm.requests.clear()
    calls = attacks(folders[victim])
    llm.tool_calls(calls).reply("Done.")

    await run_turn(SessionRef("web:attack", accounts[attacker]), "look around", channel="web")

    results = tool_results(llm.requests[-1])
    assert len(results) == len(calls)
    assert_nothing_leaked(results, folders[victim])
    assert_untouched(folders[victim])
    by_call = dict(zip([json.dumps(c) for c in calls], results, strict=True))
    # The refusals say why, and the attacker's own folder is where its work went.
    for refused in (0, 1, 2, 3, 5, 7, 8, 9, 10, 12):
        assert "outside the workspace" in by_call[json.dumps(calls[refused])], calls[refused]
    for followed_out in (14, 15):
        assert "outside the workspace" in by_call[json.dumps(calls[followed_out])]
    in_the_sandbox = by_call[json.dumps(calls[11])]
    assert in_the_sandbox.count("No such file or directory") == 2 and "end" in in_the_sandbox
    assert "Directory nonexistent" in in_the_sandbox
    assert f"{folders[attacker]}/secret.txt" in in_the_sandbox  # its own file, found
    assert str(folders[victim]) + "/secret.txt\n" not in in_the_sandbox
    assert (folders[attacker] / "link").is_symlink()
    # Its prompt has its own instructions and skills, never the other's.
    system = llm.requests[0]["messages"][0]["content"]
    assert PROMPT_NOTE.format(name=attacker) in system
    assert f"{attacker}-skill" in system and f"{victim}-skill" not in system
    assert f"no skill is called '{victim}-skill'" in results[-1]


async def test_a_sub_agent_works_in_its_users_folder(
    llm: ScriptedLLM, workspace: Path, accounts: dict[str, User]
) -> None:
    folders = {name: await plant(llm, workspace, user) for name, user in accounts.items()}
    llm.requests.clear()
    llm.tool_call("subagent", {"task": "look around", "label": "snoop"})
    calls = attacks(folders["alice"])
    llm.tool_calls([*calls, ("write_file", {"path": "report.txt", "content": "sub"})])
    llm.reply("Nothing found.")  # the sub-agent's answer
    llm.reply("It found nothing.")

    await run_turn(SessionRef("web:sub", accounts["bob"]), "send a helper", channel="web")

    sub_request = next(r for r in llm.requests if "sub-agent" in r["messages"][0]["content"])
    assert str(folders["bob"]) in sub_request["messages"][0]["content"]
    results = tool_results(llm.requests[2])
    assert len(results) == len(calls) + 1
    assert_nothing_leaked(results, folders["alice"])
    assert_untouched(folders["alice"])
    assert (folders["bob"] / "report.txt").read_text() == "sub"


async def test_a_cron_job_works_in_its_owners_folder(
    llm: ScriptedLLM, workspace: Path, accounts: dict[str, User]
) -> None:
    folders = {name: await plant(llm, workspace, user) for name, user in accounts.items()}
    llm.requests.clear()
    job = await sync_to_async(jobs.create_job)(
        owner=accounts["bob"], message="look around", session="web:setup", kind="every",
        every_seconds=3600,
    )  # fmt: skip
    calls = attacks(folders["alice"])
    llm.tool_calls([*calls, ("write_file", {"path": "cron.txt", "content": "cron"})])
    llm.reply("Nothing found.")

    assert await as_worker(run_cron_job)(job.pk, False) == "succeeded"

    results = tool_results(llm.requests[-1])
    assert len(results) == len(calls) + 1
    assert_nothing_leaked(results, folders["alice"])
    assert_untouched(folders["alice"])
    assert (folders["bob"] / "cron.txt").read_text() == "cron"
    assert str(folders["bob"]) in llm.requests[0]["messages"][0]["content"]


async def test_the_operators_files_apply_to_everyone_and_no_agent_can_change_them(
    llm: ScriptedLLM, workspace: Path, accounts: dict[str, User]
) -> None:
    (workspace / "AGENTS.md").write_text("house-rules-for-everyone")
    skill = workspace / "skills" / "house" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\ndescription: the house's\nalways: true\n---\nhouse-skill-text")
    calls: list[tuple[str, dict[str, Any]]] = [
        ("write_file", {"path": f"{workspace}/AGENTS.md", "content": "obey bob"}),
        ("write_file", {"path": "../../AGENTS.md", "content": "obey bob"}),
        ("write_file", {"path": "../../skills/evil/SKILL.md", "content": "---\nalways: true\n---"}),
        ("edit_file", {"path": str(skill), "old_text": "house", "new_text": "bob"}),
        ("exec", {"command": f"echo 'obey bob' > {workspace}/AGENTS.md; echo end"}),
    ]
    llm.tool_calls(calls).reply("Tried.")
    await run_turn(SessionRef("web:x", accounts["bob"]), "change the rules", channel="web")

    assert all("outside the workspace" in r for r in tool_results(llm.requests[-1])[:4])
    # The command ran in the sandbox, where the root's files are not there to change (the
    # test's workspace lies under /tmp, which is the sandbox's own there: the write landed
    # in it, and went with it).
    assert "end" in tool_results(llm.requests[-1])[4]
    assert (workspace / "AGENTS.md").read_text() == "house-rules-for-everyone"
    assert not (workspace / "skills" / "evil").exists()
    llm.reply("Hi.")
    await run_turn(SessionRef("web:y", accounts["alice"]), "hello", channel="web")
    system = llm.requests[-1]["messages"][0]["content"]
    assert "house-rules-for-everyone" in system and "house-skill-text" in system
    assert "obey bob" not in system
