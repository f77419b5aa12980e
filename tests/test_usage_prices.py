"""What a run costs: the model's price from litellm's table, or from AGENT_MODEL_PRICES for a
model it does not price (a self-hosted one), on both adapter paths; unknown stays null."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User

from agent.prices import Price, parse_prices
from agent.turn import SessionRef, run_turn
from sessions_app.models import Run
from tests.conftest import clean_env, make_llm, run_manage
from tests.llm_server import ScriptedLLM

USAGE = {"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500}
# USD per million tokens: 1000 prompt tokens at 0.5 and 500 completion tokens at 1.5.
PRICES = json.dumps({"openai/scripted": {"input": 0.5, "output": 1.5}})
COST = 1000 * 0.5e-6 + 500 * 1.5e-6


def test_prices_are_read_per_million_tokens() -> None:
    assert parse_prices(PRICES) == {"openai/scripted": Price(input=0.5e-6, output=1.5e-6)}
    assert parse_prices("") == {}
    assert parse_prices('{"ollama/llama3": {"input": 0, "output": 0}}') == {
        "ollama/llama3": Price(0.0, 0.0)
    }


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{not json", "AGENT_MODEL_PRICES is not valid JSON"),
        ('["openai/x"]', "AGENT_MODEL_PRICES must be a JSON object of model ids"),
        ('{"openai/x": {"input": 1}}', "the price of 'openai/x' needs exactly \"input\" and"),
        ('{"openai/x": 3}', "the price of 'openai/x' needs exactly"),
        ('{"openai/x": {"input": "1", "output": 2}}', "the input price of 'openai/x' is not a"),
        ('{"openai/x": {"input": 1, "output": -2}}', "the output price of 'openai/x' must be 0"),
        ('{"openai/x": {"input": true, "output": 2}}', "the input price of 'openai/x' is not a"),
        ('{" ": {"input": 1, "output": 2}}', "names a model with an empty id"),
    ],
)
def test_a_wrong_price_list_says_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says.replace("(", r"\(")):
        parse_prices(text)


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("AGENT_MODEL_PRICES", '{"openai/x": {"in": 1}}', "error: AGENT_MODEL_PRICES: the price"),
        ("AGENT_USER_DAILY_BUDGET", "-5", "error: AGENT_USER_DAILY_BUDGET must be 0"),
    ],
)
def test_the_site_does_not_start_on_a_wrong_price_or_budget(
    tmp_path: Path, variable: str, value: str, says: str
) -> None:
    env = {**clean_env(), "AGENT_DATA_DIR": str(tmp_path), variable: value}
    done = run_manage(env, "check")
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(says)
    assert "Traceback" not in done.stderr


async def test_an_operators_price_is_used_on_both_paths(llm: ScriptedLLM, backend: str) -> None:
    llm.reply("priced", usage=USAGE)
    response = await make_llm(llm, backend, price=(0.5e-6, 1.5e-6)).stream(
        [{"role": "user", "content": "x"}]
    )
    assert response.usage == USAGE
    assert response.cost == pytest.approx(COST)


async def test_an_operators_price_wins_over_litellms(llm: ScriptedLLM, backend: str) -> None:
    llm.reply("priced", usage=USAGE)
    model = make_llm(llm, backend, model="openai/gpt-4o-mini", price=(0.0, 0.0))
    response = await model.stream([{"role": "user", "content": "x"}])
    assert response.cost == 0.0  # priced free, not at gpt-4o-mini's table price


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("agent_settings")
async def test_a_turn_of_a_priced_model_records_its_cost(
    llm: ScriptedLLM, settings: Any, ada: User
) -> None:
    settings.AGENT_MODEL_PRICES = PRICES
    llm.tool_call("list_dir", {"path": "."}, usage=USAGE).reply("done", usage=USAGE)
    result = await run_turn(SessionRef("web:p", ada), "look", channel="web")
    assert result.success
    run = await sync_to_async(Run.objects.get)(pk=result.run_id)
    assert run.usage == {key: 2 * value for key, value in USAGE.items()}
    assert run.cost == Decimal(str(round(2 * COST, 6)))


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("agent_settings")
async def test_a_turn_of_a_model_without_a_price_has_no_cost(llm: ScriptedLLM, ada: User) -> None:
    llm.reply("done", usage=USAGE)
    result = await run_turn(SessionRef("web:p", ada), "look", channel="web")
    run = await sync_to_async(Run.objects.get)(pk=result.run_id)
    assert run.usage == USAGE
    assert run.cost is None
