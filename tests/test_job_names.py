"""Background jobs by name: each constant of `agent.jobs` is a function of the jobs layer,
tasks queued and schedules made under the names the jobs had before still run them, and no
code below the doors names a door or a job function by a dotted path of its own."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest
from django.apps import apps
from django.utils.module_loading import import_string
from django_q.models import Schedule

from agent import jobs
from tests.conftest import ROOT

# Everything under the doors and the jobs layer, whose code may name neither (`agent.jobs`,
# the one module that names the job functions, aside).
BELOW_THE_DOORS = (
    "agent/turn",
    "agent/loop.py",
    "agent/llm",
    "agent/tools",
    "agent/context.py",
    "agent/budget.py",
    "agent/events.py",
    "agent/tokens.py",
    "sessions_app",
    "cron_app",
    "skills_app",
    "mcp_app",
)
ABOVE = ("agent.doors", "agent.management", "agent.job_functions")


def test_each_job_name_is_a_function_of_the_jobs_layer() -> None:
    assert len(set(jobs.ALL)) == len(jobs.ALL) == 9
    for name in jobs.ALL:
        function = import_string(name)
        assert callable(function) and function.__module__ == "agent.job_functions", name


def test_tasks_queued_under_the_names_before_run_the_same_functions() -> None:
    from agent.doors import worker

    # The jobs that had a name before they moved; those made since never had one.
    assert len(worker.__all__) == 8
    for function in worker.__all__:
        name = f"{jobs.FUNCTIONS}.{function}"
        assert name in jobs.ALL
        assert import_string(f"agent.doors.worker.{function}") is import_string(name)


@pytest.mark.django_db
def test_schedules_made_under_the_names_before_call_the_jobs_layer() -> None:
    migration = importlib.import_module("cron_app.migrations.0004_schedules_name_the_jobs_module")
    Schedule.objects.create(name="mine", func="agent.doors.worker.run_heartbeat")
    Schedule.objects.create(name="other", func="math.floor")
    migration.forward(apps, None)
    funcs = dict(Schedule.objects.filter(name__in=["mine", "other"]).values_list("name", "func"))
    assert funcs == {"mine": jobs.RUN_HEARTBEAT, "other": "math.floor"}
    assert callable(import_string(funcs["mine"]))
    migration.backward(apps, None)
    assert Schedule.objects.get(name="mine").func == "agent.doors.worker.run_heartbeat"


def dotted_paths_upward(path: Path) -> list[str]:
    """The string constants of `path` that are dotted paths into the doors or the jobs
    layer (prose in docstrings may mention them; code may not name them)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        f"{path.relative_to(ROOT)}:{node.lineno}: {node.value}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and any(node.value == name or node.value.startswith(f"{name}.") for name in ABOVE)
    ]


def test_no_code_below_the_doors_names_a_door_or_a_job_function() -> None:
    files = [
        file
        for place in BELOW_THE_DOORS
        for file in ([ROOT / place] if place.endswith(".py") else (ROOT / place).rglob("*.py"))
        if "migrations" not in file.parts
    ]
    assert len(files) > 50
    assert [hit for file in files for hit in dotted_paths_upward(file)] == []
