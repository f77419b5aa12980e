"""The turn package's one interface: every name it offers is there, each loaded with its own
module at its first use, and importing the package loads none of its modules."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

import agent.turn
from tests.conftest import ROOT


def test_every_name_of_the_interface_is_the_one_its_module_defines() -> None:
    places = agent.turn._PLACES
    assert sorted(agent.turn.__all__) == sorted(
        ["load", *(name for names in places.values() for name in names)]
    )
    for module, names in places.items():
        defined = importlib.import_module(f"agent.turn.{module}")
        for name in names:
            assert getattr(agent.turn, name) is getattr(defined, name), name


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="run_turns"):
        agent.turn.run_turns  # type: ignore[attr-defined]  # noqa: B018


def test_the_package_loads_a_part_only_when_a_name_of_it_is_asked_for() -> None:
    code = (
        "import json, sys\n"
        "import agent.turn\n"
        "before = sorted(m for m in sys.modules if m.startswith('agent.turn.'))\n"
        "agent.turn.session_group\n"
        "after = sorted(m for m in sys.modules if m.startswith('agent.turn.'))\n"
        "print(json.dumps([before, after]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    before, after = json.loads(result.stdout)
    assert before == []
    assert after == ["agent.turn.groups"]
