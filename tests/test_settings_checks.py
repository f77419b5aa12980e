"""A wrong `AGENT_TOOLS` entry: `manage.py check` reports it, naming the entry and why, and
every way of starting the site refuses to start with one line saying so; a process started
some other way still answers `/api/health` and runs turns, without that tool."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command
from rest_framework.test import APIClient

from agent.checks import TOOLS_ERROR, check_tools
from agent.tools import Tool, ToolContext
from agent.turn import SessionRef, run_turn
from tests.conftest import ROOT, free_port, run_manage
from tests.llm_server import ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)


class Nameless(Tool):
    description = "A tool someone forgot to name."
    parameters = {"type": "object", "properties": {}}

    async def execute(self, ctx: ToolContext, /, **kwargs: Any) -> str:
        return ""


class MyExec(Tool):
    name = "exec"
    description = "A second tool called exec."
    parameters = {"type": "object", "properties": {}}

    async def execute(self, ctx: ToolContext, /, **kwargs: Any) -> str:
        return ""


def make_without_key() -> Tool:
    raise RuntimeError("DICE_API_KEY is not set")


HERE = "tests.test_settings_checks"
WRONG = {
    "no_such_package.tools.Dice": "'no_such_package.tools.Dice' cannot be imported: "
    "No module named 'no_such_package'",
    "tests.custom_tools.Dice": "'tests.custom_tools.Dice' cannot be imported: "
    "tests.custom_tools has no 'Dice'",
    "Dice": "'Dice' cannot be imported: it is not a dotted path",
    "tests.custom_tools.not_a_tool": "'tests.custom_tools.not_a_tool' is not a Tool but 'object'",
    f"{HERE}.make_without_key": f"'{HERE}.make_without_key' raised RuntimeError when made: "
    "DICE_API_KEY is not set",
    f"{HERE}.Nameless": f"'{HERE}.Nameless' gives a tool without a name",
    f"{HERE}.MyExec": f"'{HERE}.MyExec' gives a tool named 'exec': a built-in tool's name",
}


@pytest.mark.parametrize("entry", WRONG)
def test_the_system_check_names_a_wrong_entry_and_why(settings: Any, entry: str) -> None:
    settings.AGENT_TOOLS = ["tests.custom_tools.WhoAmI", entry]
    [error] = check_tools()
    assert error.id == TOOLS_ERROR
    assert error.msg.startswith(f"AGENT_TOOLS: {WRONG[entry]}")
    assert "\n" not in error.msg


def test_two_entries_that_give_tools_of_one_name_are_reported(settings: Any) -> None:
    settings.AGENT_TOOLS = ["tests.custom_tools.make_announce", "tests.custom_tools.Announce"]
    [error] = check_tools()
    assert error.msg == (
        "AGENT_TOOLS: 'tests.custom_tools.Announce' gives a tool named 'announce': "
        "'tests.custom_tools.make_announce' gives one of that name"
    )


def test_good_entries_pass(settings: Any) -> None:
    settings.AGENT_TOOLS = ["tests.custom_tools.WhoAmI", "tests.custom_tools.make_announce"]
    assert check_tools() == []
    call_command("check")


@pytest.mark.usefixtures("agent_settings")
def test_a_process_started_anyway_answers_health_and_turns_without_the_entry(
    settings: Any, llm: ScriptedLLM, caplog: pytest.LogCaptureFixture
) -> None:
    settings.AGENT_TOOLS = ["no_such_package.tools.Dice", "tests.custom_tools.WhoAmI"]

    answer = APIClient().get("/api/health")

    assert answer.status_code == 200
    names = answer.json()["tools"]
    assert "whoami" in names and "read_file" in names
    assert "'no_such_package.tools.Dice' cannot be imported" in caplog.text
    llm.reply("Hello!")
    result = async_to_sync(run_turn)(SessionRef("cli:direct", None), "hi", channel="cli")
    assert (result.status, result.text) == ("succeeded", "Hello!")
    assert "whoami" in [tool["function"]["name"] for tool in llm.requests[0]["tools"]]


# ---- every way of starting the site refuses, in one line --------------------------------

LINE = "error: AGENT_TOOLS: 'x.y.Z' cannot be imported: No module named 'x'"


def refusal(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.parametrize(
    "command",
    [
        ["serve", "--port", "{port}"],
        ["qcluster"],
        ["agent", "-m", "hello"],
    ],
)
def test_a_command_that_starts_the_site_refuses_in_one_line(
    site_env: dict[str, str], command: list[str]
) -> None:
    env = {**site_env, "AGENT_TOOLS": "x.y.Z"}
    args = [part.format(port=free_port()) for part in command]
    assert refusal(run_manage(env, *args)) == LINE


def test_the_web_process_refuses_in_one_line(site_env: dict[str, str]) -> None:
    env = {**site_env, "AGENT_TOOLS": "x.y.Z"}
    command = [sys.executable, "-m", "agentsite.web", "-b", "127.0.0.1", "-p", str(free_port())]
    done = subprocess.run(
        [*command, "agentsite.asgi:application"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refusal(done) == LINE


def test_manage_py_check_reports_the_entry(site_env: dict[str, str]) -> None:
    done = run_manage({**site_env, "AGENT_TOOLS": "x.y.Z"}, "check")
    assert done.returncode != 0
    assert f"({TOOLS_ERROR}) {LINE.removeprefix('error: ')}" in done.stderr


# A process in which OpenTelemetry's SDK cannot be imported, as where the otel extra is not
# installed: the import system is told to find none of it.
WITHOUT_OTEL_SDK = """
import sys
from importlib.abc import MetaPathFinder

class NoSdk(MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.startswith(("opentelemetry.sdk", "opentelemetry.exporter")):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoSdk())
sys.argv = ["manage.py", *sys.argv[1:]]
import runpy
runpy.run_path("manage.py", run_name="__main__")
"""


def test_a_collector_without_opentelemetry_installed_is_refused_in_one_line(
    site_env: dict[str, str],
) -> None:
    env = {**site_env, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}
    command = [sys.executable, "-c", WITHOUT_OTEL_SDK]
    done = subprocess.run(
        [*command, "agent", "-m", "hello"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "OTEL_EXPORTER_OTLP_ENDPOINT is set, but OpenTelemetry is not installed" in done.stderr
    assert "uv sync --extra otel" in done.stderr
    checked = subprocess.run([*command, "check"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert checked.returncode != 0 and "(agent.E003)" in checked.stderr
    # Installed, it passes.
    assert run_manage(env, "check").returncode == 0
