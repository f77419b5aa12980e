"""`manage.py agent` as a user runs it: real subprocesses against the scripted model."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from django.db import connection

from tests.llm_server import ScriptedLLM

ROOT = Path(__file__).resolve().parent.parent
Run = Callable[..., subprocess.CompletedProcess[str]]

pytestmark = pytest.mark.django_db(transaction=True)


def _database_url() -> str | None:
    """The test database, when it is one another process can open (not in-memory SQLite)."""
    if connection.vendor != "postgresql":
        return None
    s = connection.settings_dict
    password = f":{s['PASSWORD']}" if s.get("PASSWORD") else ""
    auth = f"{s['USER']}{password}@" if s.get("USER") else ""
    return f"postgres://{auth}{s.get('HOST') or 'localhost'}:{s.get('PORT') or 5432}/{s['NAME']}"


def _clean_env() -> dict[str, str]:
    return {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AGENT_", "DJANGO_", "DATABASE_", "PYTEST_"))
    }


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite database made once; each test starts from a copy."""
    data = tmp_path_factory.mktemp("template")
    env = {**_clean_env(), "AGENT_DATA_DIR": str(data)}
    command = [sys.executable, "manage.py", "migrate", "-v0"]
    subprocess.run(command, cwd=ROOT, env=env, check=True, timeout=120)
    return data / "db.sqlite3"


@pytest.fixture
def cli(tmp_path: Path, workspace: Path, llm: ScriptedLLM, request: pytest.FixtureRequest) -> Run:
    env = _clean_env()
    env.update(
        {
            "AGENT_MODEL": "openai/scripted",
            "AGENT_API_BASE": llm.base_url,
            "AGENT_API_KEY": "test-key",
            "AGENT_WORKSPACE": str(workspace),
            "AGENT_DATA_DIR": str(tmp_path / "data"),
            "AGENT_LLM_RETRY_BUDGET": "5",
            "PYTHONUNBUFFERED": "1",
        }
    )
    url = _database_url()
    if url:
        env["DATABASE_URL"] = url
    else:
        (tmp_path / "data").mkdir()
        shutil.copy(request.getfixturevalue("migrated_sqlite"), tmp_path / "data" / "db.sqlite3")

    def run(
        *args: str, stdin: str | None = None, **extra_env: str
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "manage.py", "agent", *args],
            cwd=ROOT,
            env={**env, **extra_env},
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )

    return run


def test_one_message_creates_a_file_and_history_carries_to_the_next_run(
    cli: Run, llm: ScriptedLLM, workspace: Path
) -> None:
    llm.tool_call("write_file", {"path": "hello.txt", "content": "Hello World"})
    llm.tool_call("read_file", {"path": "hello.txt"})
    llm.reply("I wrote hello.txt and it reads: Hello World")

    first = cli("-m", "create hello.txt containing Hello World, then read it back")

    assert first.returncode == 0, first.stderr
    assert first.stdout == "I wrote hello.txt and it reads: Hello World\n"
    assert "↳ write_file(path='hello.txt', content='Hello World')" in first.stderr
    assert "↳ read_file(path='hello.txt')" in first.stderr
    assert "Traceback" not in first.stderr
    assert (workspace / "hello.txt").read_text() == "Hello World"

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


def test_separate_sessions_do_not_share_history(cli: Run, llm: ScriptedLLM) -> None:
    llm.reply("one").reply("two")
    assert cli("-m", "first", "--session", "cli:a").returncode == 0
    result = cli("-m", "second", "--session", "cli:b", "--model", "openai/other")
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
    assert len(lines) == 1 and "Incorrect API key provided" in lines[0]
    assert "Traceback" not in result.stderr


def test_an_unreachable_server_fails_with_one_line(cli: Run) -> None:
    result = cli("-m", "hello", AGENT_API_BASE="http://127.0.0.1:9/v1", AGENT_LLM_MAX_RETRIES="1")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "could not be reached" in result.stderr.strip().splitlines()[-1]


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
