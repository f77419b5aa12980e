"""A typed view of the AGENT_* settings. Code reads these, never the environment."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from django.conf import settings


@dataclass(frozen=True, slots=True)
class AgentSettings:
    model: str
    # The ids users may pick: `model` first, then AGENT_MODELS, each once.
    models: tuple[str, ...]
    api_base: str
    api_key: str
    workspace: Path
    max_iterations: int
    subagent_max_iterations: int
    heartbeat_interval: int
    cron_max_jobs: int
    temperature: float
    max_tokens: int
    context_window: int
    memory_window: int
    restrict_to_workspace: bool
    exec_timeout: int
    exec_network: bool
    exec_max_processes: int
    exec_memory_mb: int
    web_allow_private: bool
    web_timeout: float
    brave_api_key: str
    brave_search_url: str
    duckduckgo_url: str
    llm_timeout: float
    llm_max_retries: int
    llm_retry_budget: float
    llm_backend: Literal["auto", "litellm"]
    openai_api_key: str
    openai_base_url: str
    data_dir: Path
    exec_env: dict[str, str]
    tools: tuple[str, ...]
    max_upload_bytes: int


def agent_settings() -> AgentSettings:
    """Read at call time, so tests and `override_settings` see their own values."""
    return AgentSettings(
        model=settings.AGENT_MODEL,
        models=_allowed_models(settings.AGENT_MODEL, settings.AGENT_MODELS),
        api_base=settings.AGENT_API_BASE,
        api_key=settings.AGENT_API_KEY,
        workspace=Path(settings.AGENT_WORKSPACE).resolve(),
        max_iterations=settings.AGENT_MAX_ITERATIONS,
        subagent_max_iterations=settings.AGENT_SUBAGENT_MAX_ITERATIONS,
        heartbeat_interval=settings.AGENT_HEARTBEAT_INTERVAL,
        cron_max_jobs=settings.AGENT_CRON_MAX_JOBS,
        temperature=settings.AGENT_TEMPERATURE,
        max_tokens=settings.AGENT_MAX_TOKENS,
        context_window=settings.AGENT_CONTEXT_WINDOW,
        memory_window=settings.AGENT_MEMORY_WINDOW,
        restrict_to_workspace=settings.AGENT_RESTRICT_TO_WORKSPACE,
        exec_timeout=settings.AGENT_EXEC_TIMEOUT,
        exec_network=settings.AGENT_EXEC_NETWORK,
        exec_max_processes=settings.AGENT_EXEC_MAX_PROCESSES,
        exec_memory_mb=settings.AGENT_EXEC_MEMORY_MB,
        web_allow_private=settings.AGENT_WEB_ALLOW_PRIVATE,
        web_timeout=settings.AGENT_WEB_TIMEOUT,
        brave_api_key=settings.BRAVE_API_KEY,
        brave_search_url=settings.AGENT_BRAVE_SEARCH_URL,
        duckduckgo_url=settings.AGENT_DUCKDUCKGO_URL,
        llm_timeout=settings.AGENT_LLM_TIMEOUT,
        llm_max_retries=settings.AGENT_LLM_MAX_RETRIES,
        llm_retry_budget=settings.AGENT_LLM_RETRY_BUDGET,
        llm_backend=settings.AGENT_LLM_BACKEND,
        openai_api_key=settings.OPENAI_API_KEY,
        openai_base_url=settings.OPENAI_BASE_URL,
        data_dir=Path(settings.DATA_DIR),
        exec_env=dict(settings.AGENT_EXEC_ENV),
        tools=tuple(settings.AGENT_TOOLS),
        max_upload_bytes=settings.AGENT_MAX_UPLOAD_BYTES,
    )


def _allowed_models(default: str, listed: list[str]) -> tuple[str, ...]:
    ids = [default, *(name.strip() for name in listed)]
    return tuple(dict.fromkeys(name for name in ids if name))


MODEL_HELP = (
    "No model is configured. Set AGENT_MODEL to a litellm model id, for example "
    "AGENT_MODEL=openai/gpt-4o-mini (with OPENAI_API_KEY), or AGENT_MODEL=openai/<name> "
    "with AGENT_API_BASE=http://127.0.0.1:8001/v1 for an OpenAI-compatible server; "
    "in the environment or in .env."
)
