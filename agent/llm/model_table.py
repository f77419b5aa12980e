"""litellm's table of models (context windows, output limits, prices), read as data.

The table is a JSON file inside the litellm package (the copy litellm itself reads with
LITELLM_LOCAL_MODEL_COST_MAP), read with `json` without importing litellm, which would
cost seconds and a hundred megabytes. Parsed whole, it costs 20 ms and holds 18 MB, so it
is parsed once for each model looked up (a process uses one or a few) and only that
model's entry is kept; a name the file does not hold at all (a local server's own model)
is answered in 4 ms without parsing it.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

TABLE_NAME = "model_prices_and_context_window_backup.json"


def _table_bytes() -> bytes:
    spec = importlib.util.find_spec("litellm")  # finds the package without running it
    if spec is None or not spec.submodule_search_locations:
        return b""
    path = Path(next(iter(spec.submodule_search_locations))) / TABLE_NAME
    try:
        return path.read_bytes()
    except OSError as exc:
        logger.info("litellm's model table is not readable: %s", exc)
        return b""


def _named(data: bytes, name: str) -> bool:
    """Whether `name` may be a key of the table: one that appears nowhere in it as a JSON
    string is in no entry (a local server's own model), known without parsing it."""
    if not name.isascii() or '"' in name or "\\" in name:
        return True  # spelt otherwise in JSON: the parse decides
    return f'"{name}"'.encode() in data


@functools.lru_cache(maxsize=64)
def lookup(model: str) -> dict[str, Any] | None:
    """The table's entry for a litellm model id (`openai/gpt-4o-mini` or `gpt-4o-mini`)."""
    data = _table_bytes()
    names = [model, model.split("/", 1)[1]] if "/" in model else [model]
    if not any(_named(data, name) for name in names):
        return None
    try:
        table = json.loads(data)
    except ValueError as exc:
        logger.info("litellm's model table is not readable: %s", exc)
        return None
    if not isinstance(table, dict):
        return None
    entry = table.get(model)
    if not isinstance(entry, dict) and "/" in model:
        provider, name = model.split("/", 1)
        entry = table.get(name)
        if isinstance(entry, dict) and entry.get("litellm_provider") not in (provider, None):
            # The bare name belongs to another provider's model of the same name.
            entry = None
    return entry if isinstance(entry, dict) else None


def context_window(model: str) -> int | None:
    """The model's input window: `max_input_tokens`, where `max_tokens` is often only the
    output limit and is taken only for entries that give nothing else."""
    entry = lookup(model) or {}
    value = entry.get("max_input_tokens") or entry.get("max_tokens")
    return int(value) if isinstance(value, int | float) and value > 0 else None


def max_output_tokens(model: str) -> int | None:
    entry = lookup(model) or {}
    value = entry.get("max_output_tokens")
    return int(value) if isinstance(value, int | float) and value > 0 else None


def cost(model: str, usage: dict[str, int]) -> float | None:
    """What a call cost in US dollars, from the table's per-token prices; None if unknown."""
    entry = lookup(model)
    if not entry or not usage:
        return None
    prompt_price = entry.get("input_cost_per_token")
    completion_price = entry.get("output_cost_per_token")
    if not isinstance(prompt_price, int | float) or not isinstance(completion_price, int | float):
        return None
    total = (
        usage.get("prompt_tokens", 0) * prompt_price
        + usage.get("completion_tokens", 0) * completion_price
    )
    return float(total) if total > 0 else None


def is_reasoning_model(model: str) -> bool:
    """Whether the model thinks before answering (OpenAI's o-series and gpt-5 refuse a
    temperature other than their own)."""
    return bool((lookup(model) or {}).get("supports_reasoning"))


# What a model takes besides text, by the table's word for it.
_INPUTS = {
    "image": "supports_vision",
    "audio": "supports_audio_input",
    "file": "supports_pdf_input",
}


def accepts(model: str, kind: str) -> bool:
    """Whether the table says the model takes input of `kind` (`image`, `audio`, `file`)."""
    return bool((lookup(model) or {}).get(_INPUTS[kind]))
