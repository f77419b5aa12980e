"""Each setting is declared once (`agent.conf.SETTINGS`), read once (agentsite/settings.py),
documented in the settings table of docs/configuration.md, and read by code through its typed view only."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import environ
import pytest

from agent.conf import SETTINGS, AgentSettings, agent_settings, read_settings

ROOT = Path(__file__).resolve().parent.parent
DERIVED = {"models", "data_dir", "exec_env"}
# What a person's settings add, narrowed by their teams' policy (`agent.turn.policies`).
PERSONAL = {"allowed_tools", "hidden_mcp_servers", "hidden_skills", "models_from", "tools_from"}
ANNOTATION = {
    "str": {"str", "Literal['auto', 'litellm']", 'Literal["auto", "litellm"]', "Path"},
    "int": {"int"},
    "float": {"float"},
    "bool": {"bool"},
    "list": {"list[str]", "tuple[str, ...]"},
}
PRODUCT = ["agent", "agentsite", "sessions_app", "cron_app", "skills_app", "mcp_app", "teams_app"]


def _read(environment: dict[str, str]) -> dict[str, Any]:
    env = environ.Env()
    env.ENVIRON = environment  # this reader's own, not the process's
    return read_settings(env)


def test_every_declared_setting_is_a_field_of_the_typed_view_and_no_other() -> None:
    fields = {field.name: field for field in dataclasses.fields(AgentSettings)}
    declared = {spec.field: spec for spec in SETTINGS}
    assert len(declared) == len(SETTINGS), "two settings share a field"
    assert set(fields) - DERIVED - PERSONAL == set(declared)
    for name, spec in declared.items():
        assert str(fields[name].type) in ANNOTATION[spec.kind], (spec.name, fields[name].type)


def test_each_setting_has_one_name_and_a_doc_line() -> None:
    names = [spec.name for spec in SETTINGS]
    assert len(names) == len(set(names))
    assert all(spec.doc and "\n" not in spec.doc for spec in SETTINGS)


def test_the_settings_table_documents_every_setting() -> None:
    table = [
        line
        for line in (ROOT / "docs" / "configuration.md").read_text().splitlines()
        if line.startswith("| `")
    ]
    documented = "\n".join(row.split(" | ", 1)[0] for row in table)
    assert [spec.name for spec in SETTINGS if f"`{spec.name}`" not in documented] == []


def test_code_reads_settings_through_the_typed_view_only() -> None:
    """`settings.AGENT_X` in product code would be a second way in, untyped, that the
    declaration does not see."""
    pattern = re.compile(r"settings\.(?:AGENT_\w+|OPENAI_\w+|BRAVE_API_KEY)")
    found = [
        f"{path.relative_to(ROOT)}: {match.group()}"
        for package in PRODUCT
        for path in (ROOT / package).rglob("*.py")
        if path.relative_to(ROOT).as_posix() not in ("agentsite/settings.py", "agent/conf.py")
        for match in pattern.finditer(path.read_text())
    ]
    assert found == []


def test_the_declared_defaults_apply_with_an_empty_environment() -> None:
    values = _read({})
    for spec in SETTINGS:
        assert values[spec.name] == spec.default, spec.name


def test_values_are_read_by_their_kind() -> None:
    values = _read(
        {
            "AGENT_MAX_ITERATIONS": "7",
            "AGENT_TEMPERATURE": "0.5",
            "AGENT_EXEC_NETWORK": "true",
            "AGENT_MODELS": "openai/a,openai/b",
            "AGENT_MODEL": "  openai/m ",
        }
    )
    assert values["AGENT_MAX_ITERATIONS"] == 7 and values["AGENT_TEMPERATURE"] == 0.5
    assert values["AGENT_EXEC_NETWORK"] is True
    assert values["AGENT_MODELS"] == ["openai/a", "openai/b"]
    assert values["AGENT_MODEL"] == "openai/m"


def test_earlier_names_still_count_when_the_new_one_is_unset() -> None:
    assert _read({"AGENT_API_TASK_RATE": "5/min"})["AGENT_TURN_RATE"] == "5/min"
    both = _read({"AGENT_API_TASK_RATE": "5/min", "AGENT_TURN_RATE": "9/min"})
    assert both["AGENT_TURN_RATE"] == "9/min"
    assert _read({"OPENAI_API_BASE": "http://x/v1"})["OPENAI_BASE_URL"] == "http://x/v1"


def test_a_custom_server_without_its_own_key_gets_openais() -> None:
    values = _read({"AGENT_API_BASE": "http://127.0.0.1:1/v1", "OPENAI_API_KEY": "sk-o"})
    assert values["AGENT_API_KEY"] == "sk-o"
    assert _read({"OPENAI_API_KEY": "sk-o"})["AGENT_API_KEY"] == ""


def test_a_value_outside_the_choices_is_refused_naming_them() -> None:
    with pytest.raises(ValueError, match="AGENT_LLM_BACKEND is 'fast': use auto or litellm"):
        _read({"AGENT_LLM_BACKEND": "fast"})
    assert _read({"AGENT_LLM_BACKEND": "LiteLLM"})["AGENT_LLM_BACKEND"] == "litellm"


def test_the_typed_view_follows_override_settings(settings: Any) -> None:
    settings.AGENT_MODEL = "openai/x"
    settings.AGENT_MODELS = ["openai/y", "openai/x"]
    settings.AGENT_CRON_MAX_JOBS = 3
    conf = agent_settings()
    assert conf.models == ("openai/x", "openai/y") and conf.cron_max_jobs == 3
