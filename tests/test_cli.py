"""`manage.py agent` as a user runs it: real subprocesses against the scripted model."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.tools.guards.folders import user_folder
from tests.conftest import ROOT, run_manage
from tests.llm_server import ScriptedLLM

Run = Callable[..., subprocess.CompletedProcess[str]]

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cli(site_env: dict[str, str]) -> Run:
    def run(
        *args: str, stdin: str | None = None, **extra_env: str
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "manage.py", "agent", *args],
            cwd=ROOT,
            env={**site_env, **extra_env},
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )

    return run


def add_accounts(site_env: dict[str, str], *names: str, superuser: str | None = None) -> None:
    """Accounts in the database the command line opens (a copy of its own on SQLite)."""
    code = (
        "from django.contrib.auth.models import User\n"
        f"for name in {list(names)!r}:\n"
        "    User.objects.create_user(name)\n"
        f"if {superuser!r}:\n"
        f"    User.objects.create_superuser({superuser!r})\n"
    )
    done = run_manage(site_env, "shell", "-c", code)
    assert done.returncode == 0, done.stderr


def test_one_message_creates_a_file_and_history_carries_to_the_next_run(
    cli: Run, llm: ScriptedLLM, workspace: Path, site_env: dict[str, str]
) -> None:
    add_accounts(site_env, "ada", superuser="root")
    llm.tool_call("write_file", {"path": "hello.txt", "content": "Hello World"})
    llm.tool_call("read_file", {"path": "hello.txt"})
    llm.reply("I wrote hello.txt and it reads: Hello World")

    first = cli("-m", "create hello.txt containing Hello World, then read it back")

    assert first.returncode == 0, first.stderr
    assert first.stdout == "I wrote hello.txt and it reads: Hello World\n"
    assert "↳ write_file(path='hello.txt', content='Hello World')" in first.stderr
    assert "↳ read_file(path='hello.txt')" in first.stderr
    assert "Traceback" not in first.stderr
    # It works as the first superuser, in that account's folder.
    assert (user_folder(workspace, "root") / "hello.txt").read_text() == "Hello World"
    assert not (workspace / "hello.txt").exists()

    llm.reply("You asked me to create hello.txt.")
    second = cli("-m", "What did I ask you before?")

    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "You asked me to create hello.txt."
    sent = llm.requests[-1]["messages"]
    assert [m["role"] for m in sent] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert sent[1]["content"] == "create hello.txt containing Hello World, then read it back"


def test_it_works_as_the_user_it_is_given(
    cli: Run, llm: ScriptedLLM, workspace: Path, site_env: dict[str, str]
) -> None:
    add_accounts(site_env, "ada", "bob", superuser="root")
    llm.tool_call("write_file", {"path": "note.txt", "content": "ada's"}).reply("Saved.")
    assert cli("-m", "save a note", "--user", "ada").returncode == 0
    llm.tool_call("read_file", {"path": "note.txt"}).reply("Nothing there.")
    result = cli("-m", "read my note", "--user", "bob")

    assert result.returncode == 0, result.stderr
    assert (user_folder(workspace, "ada") / "note.txt").read_text() == "ada's"
    assert "file not found: note.txt" in llm.requests[-1]["messages"][-1]["content"]
    # Each account's cli:direct is a conversation of its own.
    assert [m["role"] for m in llm.requests[-1]["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
    ]


def test_an_unknown_user_is_a_usage_error(cli: Run, llm: ScriptedLLM) -> None:
    result = cli("-m", "hello", "--user", "nobody")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "CommandError: no active user is called 'nobody': give the name of an account "
        "(the admin's Users page lists them)"
    ]
    assert llm.requests == []


def test_without_any_superuser_it_works_as_no_account(
    cli: Run, llm: ScriptedLLM, workspace: Path
) -> None:
    llm.tool_call("write_file", {"path": "a.txt", "content": "x"}).reply("Done.")
    assert cli("-m", "write a.txt").returncode == 0
    assert (user_folder(workspace, None) / "a.txt").read_text() == "x"


def test_separate_sessions_do_not_share_history(cli: Run, llm: ScriptedLLM) -> None:
    llm.reply("one").reply("two")
    assert cli("-m", "first", "--session", "cli:a").returncode == 0
    result = cli(
        "-m", "second", "--session", "cli:b", "--model", "openai/other", AGENT_MODELS="openai/other"
    )
    assert result.returncode == 0, result.stderr
    assert [m["role"] for m in llm.requests[-1]["messages"]] == ["system", "user"]
    assert llm.requests[-1]["model"] == "other"


def test_without_a_model_it_says_how_to_set_one(cli: Run, llm: ScriptedLLM) -> None:
    result = cli("-m", "hello", AGENT_MODEL="")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "AGENT_MODEL" in lines[0]
    assert result.stdout == ""
    assert llm.requests == []


def test_a_refused_key_fails_with_one_line(cli: Run, llm: ScriptedLLM) -> None:
    llm.fault(401, body={"error": {"message": "Incorrect API key provided"}})
    result = cli("-m", "hello")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "did not accept the site's credentials" in lines[0]
    assert "AGENT_API_KEY" in lines[0] and "Incorrect API key provided" not in lines[0]
    assert "Traceback" not in result.stderr


def test_an_unreachable_server_fails_with_one_line_naming_it(cli: Run) -> None:
    result = cli(
        "-m",
        "hello",
        AGENT_API_BASE="http://127.0.0.1:9/v1/",
        AGENT_LLM_MAX_RETRIES="0",
    )
    assert result.returncode == 1
    assert result.stdout == ""
    [line] = result.stderr.strip().splitlines()
    assert "connection to the model server failed" in line and "ssl:" not in line
    assert line.endswith("(tried http://127.0.0.1:9/v1)")


def test_empty_message_is_a_usage_error(cli: Run) -> None:
    result = cli("-m", "  ")
    assert result.returncode == 2
    assert "empty" in result.stderr


def test_interactive_session(cli: Run, llm: ScriptedLLM) -> None:
    llm.reply("Hi! **Nice** to meet you.")
    result = cli(stdin="hello there\n/help\nquit\n")
    assert result.returncode == 0, result.stderr
    assert "Nice to meet you." in result.stdout
    assert "/model NAME" in result.stdout
    assert len(llm.requests) == 1


def test_interactive_lines_stay_lines_and_tool_calls_show_as_cards(
    cli: Run, llm: ScriptedLLM, workspace: Path
) -> None:
    llm.tool_call("exec", {"command": "printf 'one\\ntwo\\nthree\\n'"})
    llm.reply("Counted.\nThree lines.")
    result = cli(stdin="/help\ncount\nquit\n", COLUMNS="200")
    assert result.returncode == 0, result.stderr
    # Each line as seen, without the prompts it starts or ends with.
    lines = [line.strip().strip("›").strip() for line in result.stdout.splitlines()]
    # /help's list, a command a line, as the page shows it.
    assert any(line.endswith("/new — archive this conversation and start afresh") for line in lines)
    assert "/stop — stop the running turn and its sub-agents" in lines
    # The call, then its result's heading with its duration, then the result's lines.
    call = next(i for i, line in enumerate(lines) if line.startswith("↳ exec("))
    assert re.fullmatch(r"✓ exec · \d+ ms", lines[call + 1])
    assert lines[call + 2 : call + 5] == ["one", "two", "three"]
    assert "Counted." in lines and "Three lines." in lines


def test_a_stop_from_another_terminal_ends_the_turn_in_one_line(
    cli: Run, llm: ScriptedLLM, site_env: dict[str, str]
) -> None:
    llm.hang(30)
    command = [sys.executable, "manage.py", "agent", "-m", "think hard"]
    first = subprocess.Popen(
        command, cwd=ROOT, env=site_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        for _ in range(200):  # until the turn is waiting on the model
            if llm.requests:
                break
            time.sleep(0.05)
        assert cli("-m", "/stop").stdout.strip() == "Stopped 1 task."
        _, stderr = first.communicate(timeout=30)
    finally:
        first.kill()
    assert first.returncode == 130
    assert stderr.strip().splitlines() == ["CommandError: stopped"]
