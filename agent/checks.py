"""Settings that are checked before anything starts (the tools `AGENT_TOOLS` names, the
operator's hooks, a collector named without OpenTelemetry installed to reach it, the tools
`AGENT_APPROVE_TOOLS` names): `manage.py check` reports them, and every way of starting the
site (`serve`, `python -m agentsite.web`, `qcluster`, `agent`) refuses to start on them with
one line per problem, not a traceback and not a failure at the first turn.

What would keep `exec` from running is a warning instead (the other tools work without it),
as far as it shows without trying a command: `serve` tries one at start-up and says more.

Imported by the app's `ready`, so by every process: what it needs loads only when a check runs.
"""

from __future__ import annotations

from typing import Any

from django.core import checks
from django.core.exceptions import ImproperlyConfigured

TOOLS_ERROR = "agent.E001"
HOOKS_ERROR = "agent.E002"
OTEL_ERROR = "agent.E003"
# What exporting runs to a collector imports: the optional extra `otel`.
OTEL_MODULES = ("opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.proto.http")
APPROVALS_ERROR = "agent.E004"
EXEC_WARNING = "agent.W001"


def check_tools(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The system check: an Error for each `AGENT_TOOLS` entry that gives no tool."""
    return [checks.Error(problem, id=TOOLS_ERROR) for problem in tool_problems()]


def check_hooks(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The system check: an Error for each problem of the hooks file and each `AGENT_HOOKS`
    entry that gives no function."""
    return [checks.Error(problem, id=HOOKS_ERROR) for problem in hook_problems()]


def check_otel(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The system check: an Error when a collector is named but the SDK is missing."""
    return [checks.Error(problem, id=OTEL_ERROR) for problem in otel_problems()]


def otel_problems() -> list[str]:
    from agent.conf import agent_settings

    conf = agent_settings()
    if not (conf.otel_endpoint or conf.otel_traces_endpoint):
        return []
    import importlib.util

    missing = []
    for name in OTEL_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except ImportError:  # a package on the way is missing
            found = False
        if not found:
            missing.append(name)
    if not missing:
        return []
    setting = (
        "OTEL_EXPORTER_OTLP_ENDPOINT"
        if conf.otel_endpoint
        else "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    )
    return [
        f"{setting} is set, but OpenTelemetry is not installed ({', '.join(missing)} is "
        "missing): install the otel extra (uv sync --extra otel), or unset it"
    ]


def check_approvals(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The system check: an Error for each `AGENT_APPROVE_TOOLS` entry that is no tool name
    or glob, which would make no tool wait (a typo there is a gate left open)."""
    return [checks.Error(problem, id=APPROVALS_ERROR) for problem in approval_problems()]


def approval_problems() -> list[str]:
    from agent import tool_patterns
    from agent.conf import agent_settings

    found = tool_patterns.problems(list(agent_settings().approve_tools))
    return [f"AGENT_APPROVE_TOOLS: {problem}" for problem in found]


def check_exec(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The system check: a Warning for each reason `exec` will refuse every command."""
    return [checks.Warning(problem, id=EXEC_WARNING) for problem in exec_problems()]


def exec_problems() -> list[str]:
    """Why `exec` will refuse every command, as far as it shows without running one: a
    network allowed but no helper to give the sandbox one of its own, or, as root, a
    workspace the sandbox's account cannot reach."""
    from agent.conf import agent_settings

    conf = agent_settings()
    if not conf.restrict_to_workspace:
        return []
    from agent.tools.sandbox import network_helper_missing, out_of_reach
    from agent.tools.sandbox_net import HELPER_HINT

    problems = []
    if conf.exec_network and network_helper_missing() is not None:
        problems.append(
            "AGENT_EXEC_NETWORK is on, but slirp4netns is not installed, so exec refuses every "
            f"command rather than give it the server's network: {HELPER_HINT}, or turn "
            "AGENT_EXEC_NETWORK off"
        )
    uid = conf.sandbox_uid
    blocked = out_of_reach(conf.workspace, uid) if uid is not None else None
    if blocked is not None:
        problems.append(
            f"exec's sandbox runs as uid {uid} (AGENT_EXEC_UID), which may not pass "
            f"through {blocked} to reach AGENT_WORKSPACE ({conf.workspace}), so exec refuses "
            f"every command. Move the workspace, or let others pass (chmod o+x {blocked})"
        )
    return problems


def tool_problems() -> list[str]:
    from agent.conf import agent_settings

    if not agent_settings().tools:  # the usual case costs no import
        return []
    from agent.turn import tool_problems as problems_of

    return problems_of(agent_settings())


def hook_problems() -> list[str]:
    from agent.conf import agent_settings

    conf = agent_settings()
    if not (conf.hooks or conf.hooks_file or (conf.workspace / "hooks.json").exists()):
        return []  # the usual case costs no import
    from agent.turn import hook_problems as problems_of

    return problems_of(conf)


def setting_problems() -> list[str]:
    """What the checks below report, as lines."""
    return [*tool_problems(), *hook_problems(), *otel_problems(), *approval_problems()]


def require_settings() -> None:
    """Refuse to go on while an `AGENT_TOOLS` entry gives no tool, the hooks are broken or
    a collector is named without OpenTelemetry installed;
    manage.py prints the reason as one line (`ImproperlyConfigured`)."""
    problems = setting_problems()
    if problems:
        raise ImproperlyConfigured("; ".join(problems))


class BriefChecks:
    """For a command that runs the system checks before it starts: a failure is one line
    per problem (manage.py prints `ImproperlyConfigured` as `error: …`), not Django's report
    with its headings."""

    def check(
        self,
        app_configs: Any = None,
        tags: Any = None,
        display_num_errors: bool = False,
        include_deployment_checks: bool = False,
        fail_level: int = checks.ERROR,
        databases: Any = None,
    ) -> None:
        from django.core.management.base import SystemCheckError

        try:
            super().check(  # type: ignore[misc]
                app_configs=app_configs,
                tags=tags,
                display_num_errors=display_num_errors,
                include_deployment_checks=include_deployment_checks,
                fail_level=fail_level,
                databases=databases,
            )
        except SystemCheckError:
            found = checks.run_checks(
                app_configs=app_configs,
                tags=tags,
                include_deployment_checks=include_deployment_checks,
                databases=databases,
            )
            serious = [m for m in found if m.is_serious(fail_level) and not m.is_silenced()]
            raise ImproperlyConfigured("; ".join(_brief(m) for m in serious)) from None


def _brief(message: checks.CheckMessage) -> str:
    if message.id and message.id.startswith("agent."):
        return message.msg  # it names its setting and entry itself
    return str(message)
