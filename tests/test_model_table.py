"""litellm's model table, read as JSON from the litellm package without importing it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.llm import model_table
from tests.conftest import ROOT


@pytest.fixture
def table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A table of the operator's own in place of litellm's (an absolute name wins over the
    package's folder)."""
    path = tmp_path / "table.json"
    monkeypatch.setattr(model_table, "TABLE_NAME", str(path))
    model_table.lookup.cache_clear()
    yield path
    model_table.lookup.cache_clear()


def test_any_layout_of_the_json_is_read(table: Path) -> None:
    entries = {
        "tiny-model": {
            "litellm_provider": "openai",
            "max_input_tokens": 1234,
            "max_output_tokens": 321,
            "input_cost_per_token": 1e-6,
            "output_cost_per_token": 2e-6,
            "supports_reasoning": True,
        },
        "other/tiny-model": {"litellm_provider": "other", "max_tokens": 99},
    }
    table.write_text(json.dumps(entries, separators=(",", ":")))  # one line, no indentation

    assert model_table.context_window("openai/tiny-model") == 1234
    assert model_table.max_output_tokens("openai/tiny-model") == 321
    usage = {"prompt_tokens": 1000, "completion_tokens": 10}
    assert model_table.cost("openai/tiny-model", usage) == pytest.approx(1000e-6 + 20e-6)
    assert model_table.is_reasoning_model("tiny-model")
    # Another provider's model of the same name is not this one.
    assert model_table.context_window("other/tiny-model") == 99
    assert model_table.lookup("third/tiny-model") is None


def test_an_unreadable_table_knows_no_model(table: Path) -> None:
    table.write_text('{"gpt-4o-mini": {"max_input_tokens": 5')  # cut short
    assert model_table.lookup("openai/gpt-4o-mini") is None
    assert model_table.cost("openai/gpt-4o-mini", {"prompt_tokens": 5}) is None


def test_litellms_own_table_is_read_without_importing_litellm() -> None:
    program = (
        "import sys\n"
        "from agent.llm import model_table\n"
        "assert model_table.context_window('openai/gpt-4o-mini') >= 100_000\n"
        "assert model_table.is_reasoning_model('openai/o3-mini')\n"
        "assert 'litellm' not in sys.modules\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
