"""The agent's settings as declared: each one's name, type, default and what it does.

This is the one list of them. `agent.conf_read` reads them from the environment for
agentsite/settings.py, `agent.conf` makes their typed view, and the settings table of
docs/configuration.md and a test hold the documentation to the same list. Nothing here
imports Django, so the settings module can load it before Django is set up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["str", "int", "float", "bool", "list"]


# The host account of a site running as root's sandboxes, uid and gid alike: one no
# distribution, container runtime or subordinate-id range hands out (systemd's table of
# ranges leaves 1879048192-2147352575 unused; shadow's subordinate ids end at 600165535),
# below 2^31 so that no tool reads it as negative.
EXEC_UID = 1_900_000_000


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting: `name` in the environment and in Django's settings, `field` in
    `AgentSettings`."""

    name: str
    kind: Kind
    default: Any
    doc: str
    field: str
    # Earlier names, read when `name` is not set.
    aliases: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()


SETTINGS: tuple[Setting, ...] = (
    # The model.
    Setting("AGENT_MODEL", "str", "", "litellm model id of the default model", "model"),
    Setting(
        "AGENT_MODELS",
        "list",
        [],
        "model ids users may pick besides AGENT_MODEL; any other is refused",
        "model_choices",
    ),
    Setting(
        "AGENT_VISION_MODELS",
        "list",
        [],
        "model ids that take images, beyond those litellm's table says do (a local server's "
        "model is in no table: name it here when it can see)",
        "vision_models",
    ),
    Setting("AGENT_API_BASE", "str", "", "an OpenAI-compatible server's URL", "api_base"),
    Setting(
        "AGENT_API_KEY",
        "str",
        "",
        "the key for AGENT_API_BASE (OPENAI_API_KEY when unset and a base is given)",
        "api_key",
    ),
    Setting("OPENAI_API_KEY", "str", "", "OpenAI's key, as litellm reads it", "openai_api_key"),
    Setting(
        "OPENAI_BASE_URL",
        "str",
        "",
        "OpenAI's address for `openai/<name>` without AGENT_API_BASE",
        "openai_base_url",
        aliases=("OPENAI_API_BASE",),
    ),
    Setting(
        "AGENT_LLM_BACKEND",
        "str",
        "auto",
        "auto: OpenAI's protocol spoken directly to openai/ models, litellm for the rest",
        "llm_backend",
        choices=("auto", "litellm"),
    ),
    Setting("AGENT_TEMPERATURE", "float", 0.1, "sampling temperature", "temperature"),
    Setting("AGENT_MAX_TOKENS", "int", 4096, "tokens per model answer", "max_tokens"),
    Setting(
        "AGENT_CONTEXT_WINDOW",
        "int",
        0,
        "the model's context window in tokens; 0: the server's /v1/models or litellm's table",
        "context_window",
    ),
    Setting(
        "AGENT_LLM_TIMEOUT",
        "float",
        120.0,
        "seconds without a streamed chunk before a model call counts as hung",
        "llm_timeout",
    ),
    Setting("AGENT_LLM_MAX_RETRIES", "int", 4, "retries of a failed model call", "llm_max_retries"),
    Setting(
        "AGENT_LLM_RETRY_BUDGET",
        "float",
        60.0,
        "seconds all of a call's retry waits may add up to",
        "llm_retry_budget",
    ),
    # Turns.
    Setting("AGENT_WORKSPACE", "str", "", "the workspace folder (./workspace)", "workspace"),
    Setting("AGENT_MAX_ITERATIONS", "int", 20, "model calls per turn", "max_iterations"),
    Setting(
        "AGENT_SUBAGENT_MAX_ITERATIONS",
        "int",
        15,
        "model calls per sub-agent",
        "subagent_max_iterations",
    ),
    Setting(
        "AGENT_MEMORY_WINDOW",
        "int",
        50,
        "history messages loaded per turn; past it, the oldest are consolidated",
        "memory_window",
    ),
    Setting(
        "AGENT_TURN_RATE",
        "str",
        "30/min",
        "turns each user may start (chat, API, cron runs, sub-agents), as DRF writes rates",
        "turn_rate",
        aliases=("AGENT_API_TASK_RATE",),
    ),
    Setting(
        "AGENT_HEARTBEAT_INTERVAL",
        "int",
        1800,
        "seconds between looks at each user's HEARTBEAT.md; 0 turns them off",
        "heartbeat_interval",
    ),
    Setting("AGENT_CRON_MAX_JOBS", "int", 20, "cron jobs one user may have", "cron_max_jobs"),
    Setting(
        "AGENT_TRACE",
        "bool",
        True,
        "record each model call and tool call of a run (its trace, the admin's timeline)",
        "trace",
    ),
    # OpenTelemetry, under the names its SDKs read everywhere (agent/turn/telemetry.py).
    Setting(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "str",
        "",
        "an OTLP/HTTP collector's base URL: runs, model calls and tool calls go there as spans",
        "otel_endpoint",
    ),
    Setting(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "str",
        "",
        "the collector's URL for traces itself, instead of <OTEL_EXPORTER_OTLP_ENDPOINT>/v1/traces",
        "otel_traces_endpoint",
    ),
    Setting(
        "OTEL_EXPORTER_OTLP_HEADERS",
        "str",
        "",
        "headers sent with each export, as name=value pairs separated by commas",
        "otel_headers",
    ),
    Setting(
        "OTEL_SERVICE_NAME",
        "str",
        "agentsite",
        "the service the spans say they come from",
        "otel_service",
    ),
    # Usage and cost.
    Setting(
        "AGENT_MODEL_PRICES",
        "str",
        "",
        'JSON prices in USD per million tokens: {"openai/llama3": {"input": 0.5, "output": 1.5}}',
        "model_prices",
    ),
    Setting(
        "AGENT_USER_DAILY_BUDGET",
        "float",
        0.0,
        "USD each user's runs may cost per UTC day, past which every door refuses their turns "
        "until 00:00 UTC (staff may set another per user); 0: no budget",
        "user_daily_budget",
    ),
    # Tools.
    Setting(
        "AGENT_TOOLS",
        "list",
        [],
        "dotted paths of tools of your own, offered beside the built-in ones",
        "tools",
    ),
    Setting(
        "AGENT_APPROVE_TOOLS",
        "list",
        [],
        "tools (names or globs such as mcp_*) that wait for a person's yes before they run",
        "approve_tools",
    ),
    Setting(
        "AGENT_APPROVAL_TIMEOUT",
        "int",
        600,
        "seconds a tool call waits for its approval before it counts as declined",
        "approval_timeout",
    ),
    Setting(
        "AGENT_HOOKS_FILE",
        "str",
        "",
        "JSON file of the operator's hook commands (<workspace>/hooks.json)",
        "hooks_file",
    ),
    Setting(
        "AGENT_HOOKS",
        "list",
        [],
        "Python hook functions (package.module:function) called with every hook event",
        "hooks",
    ),
    Setting(
        "AGENT_RESTRICT_TO_WORKSPACE",
        "bool",
        True,
        "file tools stay in the user's folder and exec runs in its sandbox; false runs "
        "commands on the host",
        "restrict_to_workspace",
    ),
    Setting(
        "AGENT_TEAM_FILES_IN_PERSONAL_CHATS",
        "bool",
        False,
        "a member's personal chats also read their teams' bootstrap files and skills "
        "(`<workspace>/teams/<slug>/`), after the operator's",
        "team_files_in_personal_chats",
    ),
    Setting("AGENT_EXEC_TIMEOUT", "int", 60, "seconds before exec kills a command", "exec_timeout"),
    Setting(
        "AGENT_EXEC_NETWORK",
        "bool",
        False,
        "sandboxed commands may reach the internet (never this server, private networks or "
        "cloud metadata); needs slirp4netns, without which exec refuses commands",
        "exec_network",
    ),
    Setting(
        "AGENT_EXEC_UID",
        "int",
        EXEC_UID,
        "uid and gid exec's sandbox and its network helper run as when the site runs as root",
        "exec_uid",
    ),
    Setting(
        "AGENT_EXEC_MAX_PROCESSES",
        "int",
        128,
        "processes (threads count) a command may run at once",
        "exec_max_processes",
    ),
    Setting(
        "AGENT_EXEC_MEMORY_MB", "int", 1024, "memory per process of a command", "exec_memory_mb"
    ),
    Setting(
        "AGENT_MAX_UPLOAD_BYTES",
        "int",
        20 * 1024 * 1024,
        "the largest file a user may upload into their folder; past it /api/uploads answers 413",
        "max_upload_bytes",
    ),
    Setting(
        "AGENT_WEB_ALLOW_PRIVATE",
        "bool",
        False,
        "web_fetch may reach loopback, private and link-local addresses",
        "web_allow_private",
    ),
    Setting("AGENT_WEB_TIMEOUT", "float", 20.0, "seconds per web request", "web_timeout"),
    Setting("BRAVE_API_KEY", "str", "", "web_search asks Brave Search with it", "brave_api_key"),
    Setting(
        "AGENT_BRAVE_SEARCH_URL",
        "str",
        "https://api.search.brave.com/res/v1/web/search",
        "Brave Search's address",
        "brave_search_url",
    ),
    Setting(
        "AGENT_DUCKDUCKGO_URL",
        "str",
        "https://html.duckduckgo.com/html/",
        "DuckDuckGo's address, for web_search without a Brave key",
        "duckduckgo_url",
    ),
    # The worker.
    Setting("AGENT_WORKERS", "int", 2, "django-q2 worker processes", "workers"),
    Setting("AGENT_TASK_TIMEOUT", "int", 3600, "seconds a background task may run", "task_timeout"),
    # Signing in.
    Setting(
        "AGENT_LOGIN_FAILURE_LIMIT",
        "int",
        5,
        "wrong passwords for one username before it is locked; 0 turns the throttle off",
        "login_failure_limit",
    ),
    Setting(
        "AGENT_LOGIN_ADDRESS_FAILURE_LIMIT",
        "int",
        20,
        "wrong passwords from one address before it is locked",
        "login_address_failure_limit",
    ),
    Setting(
        "AGENT_LOGIN_COOLOFF",
        "int",
        900,
        "seconds a lock lasts after the last failure",
        "login_cooloff",
    ),
    Setting(
        "AGENT_PASSWORD_LOGIN",
        "bool",
        True,
        "people may sign in with a password; false: superusers only (a break-glass account), "
        "everyone else through the identity provider",
        "password_login",
    ),
    # Teams and the identity provider.
    Setting(
        "AGENT_OIDC_ISSUER",
        "str",
        "",
        "the OpenID Connect provider's issuer URL (its /.well-known/openid-configuration is "
        "read from there); set, the sign-in page leads to it",
        "oidc_issuer",
    ),
    Setting(
        "AGENT_OIDC_CLIENT_ID", "str", "", "this site's client id at the provider", "oidc_client_id"
    ),
    Setting(
        "AGENT_OIDC_CLIENT_SECRET",
        "str",
        "",
        "this site's client secret at the provider (empty for a public client: PKCE alone)",
        "oidc_client_secret",
    ),
    Setting(
        "AGENT_OIDC_GROUPS_CLAIM",
        "str",
        "groups",
        "the claim that lists a person's groups; a group named as a team's slug makes them a "
        "member at each sign-in",
        "oidc_groups_claim",
    ),
    Setting(
        "AGENT_OIDC_TEAM_GROUPS",
        "list",
        ["*"],
        "which of the provider's groups count as teams, as patterns (support, eng-*); others "
        "are ignored",
        "oidc_team_groups",
    ),
    Setting(
        "AGENT_OIDC_SCOPES",
        "str",
        "openid email profile",
        "the scopes asked for at sign-in (add groups where the provider wants it)",
        "oidc_scopes",
    ),
    Setting(
        "AGENT_OIDC_BUTTON",
        "str",
        "Sign in with your organisation",
        "the sign-in page's button for the provider",
        "oidc_button",
    ),
    Setting(
        "AGENT_SCIM_TOKEN",
        "str",
        "",
        "the bearer token the identity provider's provisioning (SCIM 2.0, at /scim/v2/) "
        "sends: it creates people, deactivates them and sets their teams; unset: no SCIM",
        "scim_token",
    ),
    Setting(
        "AGENT_LDAP_SERVER_URI",
        "str",
        "",
        "an LDAP or Active Directory server (ldap://host, ldaps://host); needs the ldap extra",
        "ldap_server_uri",
    ),
    Setting(
        "AGENT_LDAP_BIND_DN", "str", "", "the account the site searches LDAP with", "ldap_bind_dn"
    ),
    Setting("AGENT_LDAP_BIND_PASSWORD", "str", "", "its password", "ldap_bind_password"),
    Setting(
        "AGENT_LDAP_USER_SEARCH",
        "str",
        "",
        "where people are, and how they are found: a base DN, then a filter with %(user)s, "
        "as ou=people,dc=example,dc=com?(uid=%(user)s)",
        "ldap_user_search",
    ),
    Setting(
        "AGENT_LDAP_GROUP_SEARCH",
        "str",
        "",
        "the base DN of the groups whose names (cn) are teams' slugs",
        "ldap_group_search",
    ),
    Setting(
        "AGENT_LDAP_GROUP_TYPE",
        "str",
        "groupofnames",
        "how the groups list their members",
        "ldap_group_type",
        choices=("groupofnames", "posixgroup", "activedirectory"),
    ),
    Setting(
        "AGENT_PROXY_COUNT",
        "int",
        0,
        "reverse proxies in front that append to X-Forwarded-For; unset behind them, all "
        "visitors share the proxy's address for the sign-in throttle",
        "proxy_count",
    ),
)
