"""`message`: the agent speaks up before its turn ends, or in another conversation."""

from __future__ import annotations

import logging
import re
from typing import Any

from agent.tools.base import Tool, ToolContext, ToolError

logger = logging.getLogger(__name__)

# A conversation the tool may name: `channel:chat_id`, kept to characters that session keys
# use everywhere else; the turn's delivery delivers only to one of the turn owner's
# conversations that exists and that a person can open (`agent.turn.delivery.reachable`).
_CHANNEL = re.compile(r"[a-z][a-z0-9_-]{0,31}")
_CHAT_ID = re.compile(r"(?!\.\.?$)[A-Za-z0-9_.@-]{1,190}")
MAX_CHARS = 50_000
# The result of a message shown in the conversation the turn answers. The stored call with
# this result is all the record there is of it: a chat shows it as the agent's message
# after a reload too (`agent.turn.display`).
SENT_HERE = "Message sent."


class MessageTool(Tool):
    name = "message"
    description = (
        "Send a message to the user now, without ending your turn: progress on long work, "
        "or the answer of a scheduled job. Without channel and chat_id it goes to the "
        "conversation this turn answers; with them, to another existing conversation of the "
        "same user: one of their web, api or openai chats or a command-line (cli) session "
        "(channel 'web' and the chat's id, for example). If you send your answer this way, "
        "end the turn with a short line rather than repeating it."
    )
    parameters = {
        "type": "object",
        "properties": {
            "content": {"type": "string", "minLength": 1, "description": "The message."},
            "channel": {
                "type": "string",
                "description": "The target conversation's channel: web, api, openai or cli.",
            },
            "chat_id": {"type": "string", "description": "The target conversation's chat id."},
        },
        "required": ["content"],
    }

    async def execute(self, ctx: ToolContext, /, **kwargs: Any) -> str:
        content: str = kwargs["content"]
        if not content.strip():
            raise ToolError("the message is empty")
        if len(content) > MAX_CHARS:
            raise ToolError(f"the message is {len(content)} characters; at most {MAX_CHARS}")
        key = _target(ctx, kwargs.get("channel"), kwargs.get("chat_id"))
        went = await ctx.deliver(content, session_key=key)
        return f"Message sent to {went}." if went else SENT_HERE


def _target(ctx: ToolContext, channel: str | None, chat_id: str | None) -> str | None:
    channel = (channel or "").strip()
    chat_id = (chat_id or "").strip()
    if not channel and not chat_id:
        return None
    if not chat_id:
        raise ToolError("give chat_id with channel, or neither to answer this conversation")
    channel = channel or ctx.channel
    if not _CHANNEL.fullmatch(channel):
        raise ToolError(f"channel {channel!r} is not a channel name (web, api, ...)")
    if not _CHAT_ID.fullmatch(chat_id):
        raise ToolError(
            f"chat_id {chat_id!r} may hold only letters, digits and . _ @ - (1 to 190 of them)"
        )
    return f"{channel}:{chat_id}"
