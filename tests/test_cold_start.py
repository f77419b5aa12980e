"""A command-line process as a newcomer starts it: it loads nothing that only the web server
needs, and on a database that has not been migrated it sets up the embedded one by itself
or says in one line what to do, never with a traceback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.conftest import ROOT, clean_env, free_port, python, run_manage
from tests.llm_server import ScriptedLLM

# Whole packages a command-line turn never needs at start-up: the web server and its TLS,
# the tool-argument validator (loaded with the first tool call), the model SDKs (loaded with
# the first model call).
SERVER_ONLY_PACKAGES = (
    "daphne",
    "twisted",
    "autobahn",
    "OpenSSL",
    "jsonschema",
    "litellm",
    "openai",
)
# The URLconf, and the views, DRF and schema generator it brings with it.
SERVER_ONLY_MODULES = (
    "agentsite.urls",
    "agent.doors.pages",
    "agent.doors.api.urls",
    "agent.doors.api.task_views",
    "rest_framework.views",
)
# drf-spectacular is an installed app (for its templates), so its package and app config load
# with every process; nothing else of it may.
SPECTACULAR_APP_MODULES = {"drf_spectacular", "drf_spectacular.apps", "drf_spectacular.checks"}

# What a turn loads only when it needs it: the migration plan, when a migration file is not
# recorded as applied, and the glob tool's matcher.
LOADED_WHEN_NEEDED = ("django.db.migrations.executor", "wcmatch")

REPORT_MODULES = "import json, sys\nprint(json.dumps(sorted(sys.modules)))\n"


def server_only(modules: list[str]) -> list[str]:
    return [
        name
        for name in modules
        if name.split(".")[0] in SERVER_ONLY_PACKAGES
        or name in SERVER_ONLY_MODULES
        or (name.split(".")[0] == "drf_spectacular" and name not in SPECTACULAR_APP_MODULES)
    ]


@pytest.fixture
def fresh_env(tmp_path: Path, llm: ScriptedLLM) -> dict[str, str]:
    """A new install: an empty data folder (no database yet), the scripted model."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    return {
        **clean_env(),
        "AGENT_DATA_DIR": str(tmp_path / "data"),
        "AGENT_WORKSPACE": str(workspace),
        "AGENT_MODEL": "openai/scripted",
        "AGENT_API_BASE": llm.base_url,
        "AGENT_API_KEY": "test-key",
        "AGENT_LLM_RETRY_BUDGET": "5",
    }


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    """The single line a refusal writes on standard error."""
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


# ---- what a command-line process imports ------------------------------------------------


def test_setting_up_django_and_the_agent_command_loads_no_server_code(tmp_path: Path) -> None:
    env = {**clean_env(), "AGENT_DATA_DIR": str(tmp_path / "data")}
    code = (
        "import os\n"
        "os.environ['DJANGO_SETTINGS_MODULE'] = 'agentsite.settings'\n"
        "import django\n"
        "django.setup()\n"
        "import agent.management.commands.agent\n"
        "import agent.turn.service\n" + REPORT_MODULES
    )
    result = python(code, env)
    assert result.returncode == 0, result.stderr
    modules = json.loads(result.stdout)
    # The check is only worth something if it looked at a process that loaded the agent.
    assert {"agent.turn.service", "agent.management.commands.agent"} <= set(modules)
    assert server_only(modules) == []


def test_a_whole_command_line_turn_loads_no_server_code(
    tmp_path: Path, fresh_env: dict[str, str], llm: ScriptedLLM, migrated_sqlite: Path
) -> None:
    """As `manage.py agent -m` runs, system checks and all: they would load the URLconf."""
    (tmp_path / "data").mkdir()
    shutil.copy(migrated_sqlite, tmp_path / "data" / "db.sqlite3")
    llm.reply("Hello!")
    code = (
        "import atexit, json, os, sys\n"
        "os.environ['DJANGO_SETTINGS_MODULE'] = 'agentsite.settings'\n"
        "atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.__stderr__))\n"
        "from django.core.management import execute_from_command_line\n"
        "execute_from_command_line(['manage.py', 'agent', '-m', 'hi'])\n"
    )
    result = python(code, fresh_env)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Hello!\n"
    modules = json.loads(result.stderr.strip().splitlines()[-1])
    assert "agent.turn.service" in modules
    # The model call loads the model SDKs; nothing else of the server may come along.
    loaded_by_the_turn = {"litellm", "openai"}
    assert [m for m in server_only(modules) if m.split(".")[0] not in loaded_by_the_turn] == []
    assert [m for m in modules if m in LOADED_WHEN_NEEDED] == []


def test_manage_py_collects_garbage_once_the_command_runs(tmp_path: Path) -> None:
    """Start-up runs without the cyclic collector; the command itself runs with it, and
    with what start-up built kept out of its way."""
    env = {**clean_env(), "AGENT_DATA_DIR": str(tmp_path / "data")}
    code = "import gc; print(gc.isenabled(), gc.get_freeze_count() > 10_000)"

    result = run_manage(env, "shell", "-c", code)

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1].split() == ["True", "True"]


def test_runserver_is_still_daphnes() -> None:
    """Without the `daphne` app, the site's own `runserver` keeps WebSockets working."""
    result = run_manage({**clean_env(), "AGENT_DATA_DIR": "/nonexistent"}, "runserver", "--help")
    assert result.returncode == 0, result.stderr
    assert "--websocket_handshake_timeout" in result.stdout


def test_the_admin_still_finds_every_admin_module() -> None:
    from django.apps import apps
    from django.contrib import admin
    from django.urls import get_resolver

    # Loading the URLconf is what looks for the admin modules.
    assert get_resolver().url_patterns
    for label in (
        "auth.User",
        "auth.Group",
        "authtoken.TokenProxy",
        "django_q.Schedule",
        "django_q.Success",
        "django_q.Failure",
        "sessions_app.Session",
        "sessions_app.Run",
        "sessions_app.Message",
    ):
        assert admin.site.is_registered(apps.get_model(label)), label


# ---- commands on a database that has not been migrated ----------------------------------


def test_the_agent_sets_up_a_fresh_embedded_database_and_answers(
    fresh_env: dict[str, str], llm: ScriptedLLM, tmp_path: Path
) -> None:
    llm.reply("Hello there!").reply("Hello again!")

    first = run_manage(fresh_env, "agent", "-m", "hi")

    assert first.returncode == 0, first.stderr
    assert first.stdout == "Hello there!\n"
    database = tmp_path / "data" / "db.sqlite3"
    assert one_line(first) == f"Set up the database at {database}."
    plan = run_manage(fresh_env, "showmigrations", "--plan")
    assert plan.returncode == 0, plan.stderr
    assert "[X]" in plan.stdout and "[ ]" not in plan.stdout

    second = run_manage(fresh_env, "agent", "-m", "hi again")

    assert second.returncode == 0, second.stderr
    assert second.stdout == "Hello again!\n"
    assert second.stderr == ""
    # The second turn saw the first: it went into the database the first one set up.
    assert [m["role"] for m in llm.requests[-1]["messages"]] == [
        "system",
        "user",
        "assistant",
        "user",
    ]


def test_the_agent_brings_an_older_embedded_database_up_to_date(
    fresh_env: dict[str, str], llm: ScriptedLLM, tmp_path: Path, migrated_sqlite: Path
) -> None:
    (tmp_path / "data").mkdir()
    shutil.copy(migrated_sqlite, tmp_path / "data" / "db.sqlite3")
    # As if the site was installed before its newest migration.
    migrations = sorted(path.stem for path in (ROOT / "sessions_app" / "migrations").glob("0*.py"))
    back = run_manage(fresh_env, "migrate", "sessions_app", migrations[-2], "-v0")
    assert back.returncode == 0, back.stderr
    llm.reply("Hello!")

    result = run_manage(fresh_env, "agent", "-m", "hi")

    assert result.returncode == 0, result.stderr
    assert result.stdout == "Hello!\n"
    database = tmp_path / "data" / "db.sqlite3"
    assert one_line(result) == f"Applied 1 new migration(s) to the database at {database}."


@pytest.mark.parametrize(
    "command",
    [
        ["ensure_login"],
        ["drf_create_token", "admin"],
        ["changepassword", "admin"],
        ["createsuperuser", "--noinput", "--username", "ada", "--email", "ada@example.com"],
        ["serve", "--port", "{port}"],
        ["qcluster"],
    ],
    ids=lambda command: command[0],
)
def test_other_commands_on_a_fresh_install_say_to_migrate_in_one_line(
    fresh_env: dict[str, str], command: list[str], tmp_path: Path
) -> None:
    args = [arg.format(port=free_port()) for arg in command]

    result = run_manage(fresh_env, *args)

    assert result.returncode != 0
    line = one_line(result)
    database = tmp_path / "data" / "db.sqlite3"
    assert line == (
        f"error: the database at {database} has unapplied migrations: "
        "run `python manage.py migrate`"
    )


def test_an_unreachable_database_server_is_one_line_without_its_password(
    fresh_env: dict[str, str], llm: ScriptedLLM
) -> None:
    # Port 9 (discard) on loopback: nothing listens, so the connection is refused at once.
    env = {**fresh_env, "DATABASE_URL": "postgres://someone:s3cret-pw@127.0.0.1:9/nothing"}
    for args in (["agent", "-m", "hi"], ["ensure_login"]):
        result = run_manage(env, *args)
        assert result.returncode != 0
        line = one_line(result)
        assert line.startswith(
            "error: cannot use the database at postgresql://someone@127.0.0.1:9/nothing: "
        ), line
        assert "s3cret-pw" not in result.stderr + result.stdout
    assert llm.requests == []


@pytest.fixture
def empty_postgres() -> Iterator[str]:
    """The URL of a new, empty PostgreSQL database beside the one DATABASE_URL names,
    dropped afterwards."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        pytest.skip("needs DATABASE_URL pointing at PostgreSQL")
    import psycopg

    name = f"agentsite_unmigrated_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(urlsplit(url)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_an_unmigrated_postgresql_database_is_refused_in_one_line(
    fresh_env: dict[str, str], llm: ScriptedLLM, empty_postgres: str
) -> None:
    parts = urlsplit(empty_postgres)
    env = {**fresh_env, "DATABASE_URL": empty_postgres}
    for args in (["agent", "-m", "hi"], ["ensure_login"], ["serve", "--port", str(free_port())]):
        result = run_manage(env, *args)
        assert result.returncode != 0
        line = one_line(result)
        assert line.startswith("error: the database at postgresql://"), line
        assert line.endswith(
            f"{parts.path} has unapplied migrations: run `python manage.py migrate`"
        ), line
        if parts.password:
            assert f":{parts.password}@" not in result.stderr + result.stdout
    # Refused, not set up: a server database is migrated when its owner chooses to.
    tables = run_manage(env, "showmigrations", "--plan")
    assert "[X]" not in tables.stdout
    assert llm.requests == []
