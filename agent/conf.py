"""The agent's settings as code reads them: `agent_settings()`, a typed, frozen view.

Each setting is declared once, in `agent.conf_declared.SETTINGS` (its name, type, default
and what it does). `agentsite/settings.py`, the one place that reads the environment,
reads each of them from there (`read_settings`, in `agent.conf_read`) into a Django setting
of the same name, so that `override_settings` and the admin's tooling see them as any
other. Code reads them through `agent_settings()`, made at call time; the settings table in
docs/configuration.md and a test keep the declaration and the documentation one list.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from django.conf import settings

# Re-exported: the declaration and its reader are part of this module's interface.
from agent.conf_declared import SETTINGS, Kind, Setting
from agent.conf_read import read_settings

__all__ = [
    "MODEL_HELP",
    "SETTINGS",
    "AgentSettings",
    "Kind",
    "Setting",
    "agent_settings",
    "read_settings",
]


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """The settings as code reads them. Each field but the derived ones at the end is the
    declared setting whose `field` it is (a test holds the two lists together)."""

    model: str
    api_base: str
    api_key: str
    openai_api_key: str
    openai_base_url: str
    llm_backend: Literal["auto", "litellm"]
    temperature: float
    max_tokens: int
    context_window: int
    llm_timeout: float
    llm_max_retries: int
    llm_retry_budget: float
    workspace: Path
    max_iterations: int
    subagent_max_iterations: int
    memory_window: int
    turn_rate: str
    heartbeat_interval: int
    cron_max_jobs: int
    trace: bool
    otel_endpoint: str
    otel_traces_endpoint: str
    otel_headers: str
    otel_service: str
    model_prices: str
    vision_models: tuple[str, ...]
    user_daily_budget: float
    tools: tuple[str, ...]
    approve_tools: tuple[str, ...]
    approval_timeout: int
    hooks_file: str
    hooks: tuple[str, ...]
    restrict_to_workspace: bool
    team_files_in_personal_chats: bool
    exec_timeout: int
    exec_network: bool
    exec_uid: int
    exec_max_processes: int
    exec_memory_mb: int
    max_upload_bytes: int
    web_allow_private: bool
    web_timeout: float
    brave_api_key: str
    brave_search_url: str
    duckduckgo_url: str
    workers: int
    task_timeout: int
    login_failure_limit: int
    login_address_failure_limit: int
    login_cooloff: int
    proxy_count: int
    password_login: bool
    oidc_issuer: str
    oidc_client_id: str
    oidc_client_secret: str
    oidc_groups_claim: str
    oidc_team_groups: list[str]
    oidc_scopes: str
    oidc_button: str
    scim_token: str
    ldap_server_uri: str
    ldap_bind_dn: str
    ldap_bind_password: str
    ldap_user_search: str
    ldap_group_search: str
    ldap_group_type: str
    model_choices: list[str]  # AGENT_MODELS as given; `models` is what code checks against
    # Derived from the declared ones and the site.
    models: tuple[str, ...]  # the ids users may pick: `model` first, then AGENT_MODELS
    data_dir: Path
    exec_env: dict[str, str]  # the server's environment without its secrets (settings.py)
    # A person's settings (`agent.turn.person_settings`): the operator's narrowed by the
    # person's policy (teams_app.policy). Besides the fields above that a policy narrows
    # (`model`, `models`, `approve_tools`, `turn_rate`, `exec_network`): the tools the
    # person's agent may use (None: every tool), the MCP servers and skills assigned to
    # teams they are not in, and where the models and tools came from, for refusals.
    allowed_tools: tuple[str, ...] | None = None
    hidden_mcp_servers: frozenset[str] = frozenset()
    hidden_skills: frozenset[str] = frozenset()
    models_from: str = "operator"
    tools_from: str = "operator"

    @property
    def sandbox_uid(self) -> int | None:
        """The host account `exec` runs as when it is not the site's own: a site running as
        root runs its sandboxes as AGENT_EXEC_UID, and users' folders are that account's."""
        return self.exec_uid if self.restrict_to_workspace and os.geteuid() == 0 else None


def agent_settings() -> AgentSettings:
    """Read at call time, so tests and `override_settings` see their own values."""
    declared: dict[str, Any] = {spec.field: getattr(settings, spec.name) for spec in SETTINGS}
    declared["workspace"] = Path(declared["workspace"]).resolve()
    declared["tools"] = tuple(declared["tools"])
    # Each entry as given: one that is no name or glob stops the site (`agent.checks`).
    declared["approve_tools"] = tuple(
        dict.fromkeys(item.strip() for item in declared["approve_tools"] if item.strip())
    )
    declared["hooks"] = tuple(declared["hooks"])
    declared["vision_models"] = tuple(name.strip() for name in declared["vision_models"])
    return AgentSettings(
        **declared,
        models=_allowed_models(declared["model"], declared["model_choices"]),
        data_dir=Path(settings.DATA_DIR),
        exec_env=dict(settings.AGENT_EXEC_ENV),
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
