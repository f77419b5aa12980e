from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.llm_server import ScriptedLLM


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
