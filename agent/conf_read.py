"""Reading the declared settings from the environment, and refusing bad values at start-up.

Only agentsite/settings.py calls `read_settings`, with django-environ's reader: it stays
the one place that reads the environment. The checks here are those a value's kind cannot
express (a choice, a uid, prices, a budget), so that a bad one stops the site before it
serves anything.
"""

from __future__ import annotations

import math
from typing import Any

from agent.conf_declared import EXEC_UID, SETTINGS
from agent.prices import parse_prices


def read_settings(env: Any, *, defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every declared setting's value, read from `env` (django-environ's `Env`);
    `defaults` stand in for declared defaults that depend on where the site is."""
    chosen = defaults or {}
    values: dict[str, Any] = {}
    for spec in SETTINGS:
        default = chosen.get(spec.name, spec.default)
        for alias in spec.aliases:
            default = getattr(env, spec.kind)(alias, default=default)
        value = getattr(env, spec.kind)(spec.name, default=default)
        if spec.kind == "str":
            value = value.strip()
        if spec.choices and value.lower() not in spec.choices:
            raise ValueError(
                f"{spec.name} is {value!r}: use {' or '.join(spec.choices)} "
                f"(the default is {spec.default})"
            )
        values[spec.name] = value.lower() if spec.choices else value
    if values["AGENT_API_BASE"] and not values["AGENT_API_KEY"]:
        # A custom server given without its own key gets OpenAI's, as the OpenAI SDK would.
        values["AGENT_API_KEY"] = values["OPENAI_API_KEY"]
    # Wrong prices would make every run's cost wrong or unknown: refused at start-up.
    parse_prices(values["AGENT_MODEL_PRICES"])
    if not 0 < values["AGENT_EXEC_UID"] < 2**32 - 1:
        raise ValueError(
            f"AGENT_EXEC_UID is {values['AGENT_EXEC_UID']}: use a uid other than root's (0), "
            f"below {2**32 - 1} (the default is {EXEC_UID})"
        )
    if not 0 <= values["AGENT_USER_DAILY_BUDGET"] < math.inf:
        raise ValueError("AGENT_USER_DAILY_BUDGET must be 0 (no budget) or more")
    return values
