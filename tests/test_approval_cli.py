"""`manage.py agent` and tools that wait for a person, as real subprocesses: with `-m` the
call is declined unless `--yes` allows it; in a chat it is asked about on the terminal."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.tools.guards.folders import user_folder
from tests.conftest import run_manage
from tests.llm_server import ScriptedLLM
from tests.test_cli import Run, add_accounts, cli  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db(transaction=True)

WAITS = {"AGENT_APPROVE_TOOLS": "write_file"}


def tool_result(llm: ScriptedLLM) -> str:
    (result,) = [m for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    return str(result["content"])


def test_one_message_declines_unless_yes_is_given(
    cli: Run,  # noqa: F811
    llm: ScriptedLLM,
    workspace: Path,
    site_env: dict[str, str],
) -> None:
    add_accounts(site_env, superuser="root")
    llm.tool_call("write_file", {"path": "a.txt", "content": "A"}).reply("I could not write it.")
    declined = cli("-m", "write a.txt", "--session", "cli:no", **WAITS)

    assert declined.returncode == 0, declined.stderr
    assert declined.stdout == "I could not write it.\n"
    assert (
        "? write_file(path='a.txt', content='A') waits for approval: declined: give --yes "
        "to allow it" in declined.stderr
    )
    assert tool_result(llm).startswith("Error: the user declined write_file(path='a.txt'")
    assert not (user_folder(workspace, "root") / "a.txt").exists()

    llm.tool_call("write_file", {"path": "b.txt", "content": "B"}).reply("Wrote b.txt.")
    allowed = cli("-m", "write b.txt", "--session", "cli:yes", "--yes", **WAITS)

    assert allowed.returncode == 0, allowed.stderr
    assert allowed.stdout == "Wrote b.txt.\n"
    assert "waits for approval: allowed (--yes)" in allowed.stderr
    assert tool_result(llm).startswith("Wrote")
    assert (user_folder(workspace, "root") / "b.txt").read_text() == "B"


def test_a_chat_asks_on_the_terminal(
    cli: Run,  # noqa: F811
    llm: ScriptedLLM,
    workspace: Path,
) -> None:
    llm.tool_call("write_file", {"path": "c.txt", "content": "C"}).reply("Declined, fine.")
    llm.tool_call("write_file", {"path": "d.txt", "content": "D"}).reply("Wrote d.")
    llm.tool_call("write_file", {"path": "e.txt", "content": "E"}).reply("Wrote e.")
    answers = "write c\nmaybe\nn\nwrite d\nalways\nwrite e\nexit\n"
    chat = cli(stdin=answers, **WAITS)

    assert chat.returncode == 0, chat.stderr
    asked = chat.stdout.count("? Allow write_file(")
    assert asked == 3  # c twice (the first answer meant nothing), d once, e not at all
    assert "Declined, fine." in chat.stdout and "Wrote e." in chat.stdout
    folder = user_folder(workspace, None)
    assert not (folder / "c.txt").exists()
    assert (folder / "d.txt").read_text() == "D" and (folder / "e.txt").read_text() == "E"
    declined = [m for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert declined[-1]["content"].startswith("Error: the user declined write_file(")


def test_an_entry_that_names_no_tool_stops_the_command(
    cli: Run,  # noqa: F811
    llm: ScriptedLLM,
    site_env: dict[str, str],
) -> None:
    """A typo would leave the gate open: the site does not start on it."""
    result = cli("-m", "hello", AGENT_APPROVE_TOOLS="exec;, write_file")
    assert result.returncode != 0
    assert "AGENT_APPROVE_TOOLS: 'exec;' is not a tool name or glob" in result.stderr
    assert "Traceback" not in result.stderr
    assert llm.requests == []
    check = run_manage({**site_env, "AGENT_APPROVE_TOOLS": "exec;"}, "check")
    assert check.returncode != 0 and "agent.E004" in check.stderr
