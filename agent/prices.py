"""The prices the operator gives models (`AGENT_MODEL_PRICES`): for a self-hosted model that
litellm's table does not price, or a rate of one's own for one it does.

The setting is a JSON object of model ids, each with its `input` and `output` price in US
dollars per million tokens: `{"openai/llama3": {"input": 0.5, "output": 1.5}}`. A price
named here wins over litellm's table. Nothing here imports Django: `agent.conf` checks the
setting with it as the site starts, and the turn hands each model's price to the adapter.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass

SETTING = "AGENT_MODEL_PRICES"
EXAMPLE = '{"openai/llama3": {"input": 0.5, "output": 1.5}}'
PER_MILLION = 1_000_000


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per token: what one prompt token and one completion token cost."""

    input: float
    output: float


def parse_prices(text: str) -> dict[str, Price]:
    """The prices in `text` by model id; a ValueError that says what is wrong otherwise."""
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{SETTING} is not valid JSON ({exc}); write it as {EXAMPLE}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{SETTING} must be a JSON object of model ids, as {EXAMPLE}")
    return {_model_id(model): _price(model, given) for model, given in data.items()}


def _model_id(model: str) -> str:
    if not model.strip():
        raise ValueError(f"{SETTING} names a model with an empty id")
    return model.strip()


def _price(model: str, given: object) -> Price:
    if not isinstance(given, dict) or set(given) != {"input", "output"}:
        raise ValueError(
            f'{SETTING}: the price of {model!r} needs exactly "input" and "output", '
            f"in US dollars per million tokens, as {EXAMPLE}"
        )
    rates = []
    for side in ("input", "output"):
        value = given[side]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{SETTING}: the {side} price of {model!r} is not a number")
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{SETTING}: the {side} price of {model!r} must be 0 or more")
        rates.append(value / PER_MILLION)
    return Price(input=rates[0], output=rates[1])


@functools.lru_cache(maxsize=8)
def _parsed(text: str) -> dict[str, Price]:
    return parse_prices(text)


def price_of(model: str, text: str) -> Price | None:
    """`model`'s price in the setting's `text` (checked when the site started), if any."""
    return _parsed(text).get(model) if text else None
