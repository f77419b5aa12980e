from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection

from tests.llm_server import ScriptedLLM

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def llm() -> Iterator[ScriptedLLM]:
    """A scripted OpenAI-compatible model on 127.0.0.1."""
    with ScriptedLLM() as server:
        yield server


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


@pytest.fixture
def agent_settings(settings, llm: ScriptedLLM, workspace: Path, tmp_path: Path):
    """Django settings pointing the agent at the scripted model and a fresh workspace."""
    settings.AGENT_MODEL = "openai/scripted"
    settings.AGENT_API_BASE = llm.base_url
    settings.AGENT_API_KEY = "test-key"
    settings.AGENT_WORKSPACE = workspace
    settings.DATA_DIR = tmp_path / "data"
    settings.AGENT_LLM_TIMEOUT = 5.0
    settings.AGENT_LLM_MAX_RETRIES = 3
    settings.AGENT_LLM_RETRY_BUDGET = 10.0
    return settings


def _database_url() -> str | None:
    """The test database, when it is one another process can open (not in-memory SQLite)."""
    if connection.vendor != "postgresql":
        return None
    s = connection.settings_dict
    password = f":{s['PASSWORD']}" if s.get("PASSWORD") else ""
    auth = f"{s['USER']}{password}@" if s.get("USER") else ""
    return f"postgres://{auth}{s.get('HOST') or 'localhost'}:{s.get('PORT') or 5432}/{s['NAME']}"


def clean_env() -> dict[str, str]:
    """This process's environment without the settings a test process sets for itself."""
    return {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AGENT_", "DJANGO_", "DATABASE_", "PYTEST_"))
    }


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite database made once; each test starts from a copy."""
    data = tmp_path_factory.mktemp("template")
    env = {**clean_env(), "AGENT_DATA_DIR": str(data)}
    command = [sys.executable, "manage.py", "migrate", "-v0"]
    subprocess.run(command, cwd=ROOT, env=env, check=True, timeout=120)
    return data / "db.sqlite3"


@pytest.fixture
def site_env(
    tmp_path: Path, workspace: Path, llm: ScriptedLLM, request: pytest.FixtureRequest
) -> dict[str, str]:
    """The environment for a `manage.py` subprocess: scripted model, its own workspace, and
    the test database (PostgreSQL) or a migrated SQLite copy. Tests that use it need
    `django_db(transaction=True)` so that what they write is visible across processes."""
    env = clean_env()
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
    return env
