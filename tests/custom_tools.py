"""Tools of a user's own, registered through AGENT_TOOLS by the tests."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agent.tools import Tool, ToolContext

made = 0


class WhoAmI(Tool):
    """Answers with the turn it runs in, after `wait` seconds."""

    name = "whoami"
    description = "Say which conversation and run this call belongs to."
    parameters = {
        "type": "object",
        "properties": {"wait": {"type": "number", "minimum": 0}},
        "additionalProperties": False,
    }

    def __init__(self) -> None:
        global made
        made += 1

    async def execute(self, ctx: ToolContext, /, **kwargs: Any) -> str:
        await asyncio.sleep(kwargs.get("wait", 0))
        return json.dumps(
            {
                "session": ctx.session_key,
                "channel": ctx.channel,
                "run": ctx.run_id,
                "owner": ctx.owner_id,
            }
        )


class Announce(Tool):
    name = "announce"
    description = "Send a message to a conversation (this one without `to`)."
    parameters = {
        "type": "object",
        "properties": {"text": {"type": "string"}, "to": {"type": "string"}},
        "required": ["text"],
        "additionalProperties": False,
    }

    async def execute(self, ctx: ToolContext, /, **kwargs: Any) -> str:
        await ctx.deliver(kwargs["text"], session_key=kwargs.get("to"))
        return "sent"


def make_announce() -> Tool:
    return Announce()


not_a_tool = object()
