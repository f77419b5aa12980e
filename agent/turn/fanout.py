"""Cross-process fan-out of a session's events through the channel layer.

Every socket open on a session joins the session's group, named for the session's row, so
that a session deleted and made again under the same key is a different group. Turn events
that other tabs should see (a turn starting and ending, tool cards, the final message) and
messages that arrive from elsewhere (cron results, sub-agents) travel through the group.
Streamed tokens never do: they go straight to the socket that asked, since the layer has a
capacity and one frame per token would overflow it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from agent.events import Event
from agent.turn import relay

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
# Sent to a deleted session's group: its sockets close.
CLOSED = "session.closed"
PUBLISH_TIMEOUT = 5.0


def group_name(session_id: int) -> str:
    return f"session.{session_id}"


async def publish(session_id: int, event: Event, *, origin: str = "") -> None:
    """Send `event` to every socket of the session except `origin` (a channel name)."""
    await _send(session_id, {"type": HANDLER, "frame": event.to_dict(), "origin": origin})


async def close_sockets(session_id: int) -> None:
    """Close every socket open on the session, in every process."""
    await _send(session_id, {"type": CLOSED})


async def _send(session_id: int, message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        await relay.forward(session_id, message)
        # A layer that hangs (Redis gone away) must not hold up the turn.
        await asyncio.wait_for(layer.group_send(group_name(session_id), message), PUBLISH_TIMEOUT)
    except asyncio.CancelledError:
        raise
    except Exception:  # a full, slow or unreachable layer must not break the turn
        kind = message["type"]
        logger.warning("could not send %s to session %s", kind, session_id, exc_info=True)


class GroupSink:
    """An event sink that forwards the shared events of a turn to the session's group."""

    def __init__(self, session_id: int, *, origin: str = "") -> None:
        self.session_id = session_id
        self.origin = origin

    async def __call__(self, event: Event) -> None:
        if event.type in SHARED_TYPES:
            await publish(self.session_id, event, origin=self.origin)


def on_session_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    """`post_delete` of a session, by whatever door: its sockets close once it is gone.

    Its running turn needs no message: its run was deleted with it, which the turn's
    watcher reads as a stop.
    """
    session_id = instance.pk
    # Robust: the delete is done whatever happens here; a failure is only logged.
    transaction.on_commit(lambda: async_to_sync(close_sockets)(session_id), robust=True)
