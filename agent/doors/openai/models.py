"""The models an OpenAI client sees: `agentsite`, the agent with its tools, and
`agentsite-plain`, the same model with no tools (one direct generation). Both talk to the
session's model, or AGENT_MODEL. When AGENT_MODELS lets users pick among several,
`agentsite:<id>` and `agentsite-plain:<id>` pin one of those; any other id is no model here,
the ones AGENT_MODELS leaves out included."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from agent.conf import AgentSettings

AGENT = "agentsite"
PLAIN = "agentsite-plain"
OWNER = "agentsite"
# OpenAI's `created` of a model is when it was made; here, when this process started.
STARTED = int(time.time())


@dataclass(frozen=True, slots=True)
class Choice:
    """What a model id asks for: the agent or a direct generation, on which model (None:
    the session's, else AGENT_MODEL)."""

    direct: bool
    model: str | None


def model_ids(conf: AgentSettings) -> list[str]:
    ids = [AGENT, PLAIN]
    if len(conf.models) > 1:
        for model in conf.models:
            ids += [f"{AGENT}:{model}", f"{PLAIN}:{model}"]
    return ids


def choice_of(name: str, conf: AgentSettings) -> Choice | None:
    """What model id `name` asks for; None when it names no model here."""
    for base, direct in ((AGENT, False), (PLAIN, True)):
        if name == base:
            return Choice(direct, None)
        pinned = name.removeprefix(f"{base}:")
        if pinned != name and pinned in conf.models:
            return Choice(direct, pinned)
    return None


def model_object(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": STARTED, "owned_by": OWNER}
