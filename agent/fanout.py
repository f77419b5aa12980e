"""Cross-process fan-out of a session's events through the channel layer.

Every socket open on a session joins the session's group. Turn events that other tabs
should see (a turn starting and ending, tool cards, the final message) and messages that
arrive from elsewhere (cron results, sub-agents) travel through the group. Streamed tokens
never do: they go straight to the socket that asked, since the layer has a capacity and
one frame per token would overflow it.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging

from channels.layers import get_channel_layer

from agent.events import Event

logger = logging.getLogger(__name__)

# What other sockets of the session see of a turn they did not start.
SHARED_TYPES = frozenset(
    {
        "thinking_started",
        "tool_call",
        "tool_result",
        "thinking_finished",
        "message",
        "subagent_spawned",
        "subagent_completed",
        "cron_executed",
    }
)
HANDLER = "session.event"
PUBLISH_TIMEOUT = 5.0


def group_name(session_key: str) -> str:
    # Group names allow only ASCII letters, digits, hyphens, periods and underscores.
    return "session." + hashlib.sha256(session_key.encode()).hexdigest()[:40]


async def publish(session_key: str, event: Event, *, origin: str = "") -> None:
    """Send `event` to every socket of the session except `origin` (a channel name)."""
    layer = get_channel_layer()
    if layer is None:
        return
    message = {"type": HANDLER, "frame": event.to_dict(), "origin": origin}
    try:
        # A layer that hangs (Redis gone away) must not hold up the turn.
        await asyncio.wait_for(layer.group_send(group_name(session_key), message), PUBLISH_TIMEOUT)
    except asyncio.CancelledError:
        raise
    except Exception:  # a full, slow or unreachable layer must not break the turn
        logger.warning("could not publish %s to %s", event.type, session_key, exc_info=True)


class GroupSink:
    """An event sink that forwards the shared events of a turn to the session's group."""

    def __init__(self, session_key: str, *, origin: str = "") -> None:
        self.session_key = session_key
        self.origin = origin

    async def __call__(self, event: Event) -> None:
        if event.type in SHARED_TYPES:
            await publish(self.session_key, event, origin=self.origin)
