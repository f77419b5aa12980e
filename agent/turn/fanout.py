"""Cross-process fan-out of a session's events through the channel layer.

Every socket open on a session joins the session's group, named for the session's row, so
that a session deleted and made again under the same key is a different group. Turn events
that other tabs should see (a turn starting and ending, tool cards, the final message) and
messages that arrive from elsewhere (cron results, sub-agents) travel through the group.
Streamed tokens never do, since the layer has a capacity and one frame per token would
overflow it: they go straight to the socket that asked, and joined into fewer messages to
each of the session's other sockets, which join the turn's stream when they hear it start
(`live`).

A send that the layer refuses is tried again, in order, while the turn goes on. A worker's
task runs on an event loop of its own that closes when the task returns, and with it every
send still under way: `delivering` makes the task wait for its sends first, a while, and
log as errors the events that never got through.

A user's sockets, whatever their session, hear through the user's group that the user's
access changed (`access_changed`): each checks the credential it was opened with again.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import hashlib
import logging
import weakref
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from agent.events import Event
from agent.turn import relay
from agent.turn.groups import session_group, user_group

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
        "archived",
        "model",
        "approval_request",
        "approval_resolved",
    }
)
HANDLER = "session.event"
# Sent to a deleted session's group: its sockets close.
CLOSED = "session.closed"
# Sent to a user's group when their access changed (`access_changed`).
ACCESS = "user.access"
# How long a turn waits for a send before it goes on and leaves the send to finish alone.
PUBLISH_WAIT = 5.0
# How long a send keeps trying a layer that fails (Redis restarting). Past that the event is
# dropped: the sockets that missed it read it from the stored history when they reconnect.
GIVE_UP_AFTER = 60.0
RETRY_DELAYS = (0.1, 0.2, 0.5, 1.0, 2.0)
# How long a task that is ending waits for the sends it started (`delivering`).
DRAIN_WAIT = 15.0

P = ParamSpec("P")
R = TypeVar("R")

# Per event loop, each session's latest send: the next one waits for it, so that sockets
# see a session's events in order even when one send is slow.
_sends: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, asyncio.Task[bool]]] = (
    weakref.WeakKeyDictionary()
)
# The sends started under `delivering`, with what each carries: (type, session).
_started: contextvars.ContextVar[dict[asyncio.Task[bool], tuple[str, int]] | None] = (
    contextvars.ContextVar("fanout_started", default=None)
)


async def publish(session_id: int, event: Event, *, origin: str = "") -> None:
    """Send `event` to every socket of the session except `origin` (a channel name)."""
    await _send(session_id, {"type": HANDLER, "frame": event.to_dict(), "origin": origin})


async def close_sockets(session_id: int) -> None:
    """Close every socket open on the session, in every process."""
    await _send(session_id, {"type": CLOSED})


def credential_digest(secret: str) -> str:
    """How a channel message names a login session's key or a token: by a hash of it, so
    that the secret itself never travels through the layer (nor into its logs)."""
    return hashlib.sha256(secret.encode()).hexdigest()


async def access_changed(user_id: int, *, credential: str = "") -> None:
    """Tell every socket of user `user_id`, in every process the layer reaches, that their
    access changed: each checks the credential it was opened with again. `credential`, a
    `credential_digest`, names one that is ending even if the database does not say so yet
    (a login being signed out): its sockets close."""
    layer = get_channel_layer()
    if layer is None:
        return
    message = {"type": ACCESS, "credential": credential}
    try:
        await asyncio.wait_for(layer.group_send(user_group(user_id), message), PUBLISH_WAIT)
    except asyncio.CancelledError:
        raise
    except Exception:  # each socket still checks before it acts, and its process polls
        logger.warning("could not tell the sockets of user %s of a change", user_id, exc_info=True)


async def _send(session_id: int, message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        await relay.forward(session_id, message)
    except asyncio.CancelledError:
        raise
    except Exception:  # the database away for a moment must not break the turn
        logger.warning(
            "could not relay %s to session %s", message["type"], session_id, exc_info=True
        )
    sends = _sends.setdefault(asyncio.get_running_loop(), {})
    sending = asyncio.ensure_future(_deliver(layer, session_id, message, sends.get(session_id)))
    sends[session_id] = sending
    sending.add_done_callback(lambda done: _forget(sends, session_id, done))
    started = _started.get()
    if started is not None:
        started[sending] = (message.get("frame", message)["type"], session_id)
    try:
        # Shielded: a slow layer holds the turn up no longer than this, but the event is
        # not given up; the send goes on by itself.
        await asyncio.wait_for(asyncio.shield(sending), PUBLISH_WAIT)
    except TimeoutError:
        logger.warning(
            "the channel layer is slow: %s for session %s is still being sent",
            message["type"],
            session_id,
        )


def _forget(
    sends: dict[int, asyncio.Task[bool]], session_id: int, done: asyncio.Task[bool]
) -> None:
    if sends.get(session_id) is done:
        del sends[session_id]


async def _deliver(
    layer: Any, session_id: int, message: dict[str, Any], previous: asyncio.Task[bool] | None
) -> bool:
    """Send `message` to the session's group once the send before it is done, trying again
    while the layer fails; whether it got through. Never raises."""
    if previous is not None:
        await asyncio.wait([previous])
    group = session_group(session_id)
    try:
        # Once, plainly: every event of every turn comes through here, and a retrier set up
        # for each would cost CPU per streamed chunk for failures that almost never happen.
        await layer.group_send(group, message)
        return True
    except asyncio.CancelledError:
        raise
    except Exception:
        logger.warning(
            "could not send %s to session %s; trying again",
            message["type"],
            session_id,
            exc_info=True,
        )
    return await _deliver_again(layer, group, session_id, message)


async def _deliver_again(layer: Any, group: str, session_id: int, message: dict[str, Any]) -> bool:
    import tenacity

    retrying = tenacity.AsyncRetrying(
        # Never CancelledError, a BaseException: a cancelled send ends at once.
        retry=tenacity.retry_if_exception_type(Exception),
        wait=tenacity.wait_chain(*map(tenacity.wait_fixed, RETRY_DELAYS)),
        # The first try, which failed, is not this retrier's: its deadline starts now.
        stop=tenacity.stop_before_delay(GIVE_UP_AFTER),
        reraise=True,
    )
    try:
        async for attempt in retrying:
            with attempt:
                await layer.group_send(group, message)
    except Exception:
        logger.error(
            "gave up sending %s to session %s: the channel layer kept failing",
            message["type"],
            session_id,
            exc_info=True,
        )
        return False
    logger.info("sent %s to session %s after retrying", message["type"], session_id)
    return True


def delivering(work: Callable[P, Awaitable[R]], *, what: str) -> Callable[P, Awaitable[R]]:
    """`work`, which ends only once the events it published are sent, or DRAIN_WAIT has gone
    by: those still unsent then are given up and logged as errors, under `what` ("run
    …"). For code whose event loop closes when it returns (`async_to_sync` in a worker)."""

    @functools.wraps(work)
    async def delivered(*args: P.args, **kwargs: P.kwargs) -> R:
        started: dict[asyncio.Task[bool], tuple[str, int]] = {}
        token = _started.set(started)
        try:
            return await work(*args, **kwargs)
        finally:
            _started.reset(token)
            await _drain(started, what)

    return delivered


async def _drain(started: dict[asyncio.Task[bool], tuple[str, int]], what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DRAIN_WAIT
    # Looked at afresh after each wait: a task spawned under `delivering` shares `started`
    # through its copied context, and may add sends to it while this waits.
    while pending := [sending for sending in list(started) if not sending.done()]:
        remaining = deadline - loop.time()
        if remaining <= 0:
            break
        await asyncio.wait(pending, timeout=remaining)
    sends = dict(started)
    late = [sending for sending in sends if not sending.done()]
    for sending in late:
        sending.cancel()
    if late:
        await asyncio.wait(late)
    # In the order they were published; only what is done can be asked how it ended.
    lost = Counter(
        about
        for sending, about in sends.items()
        if not sending.done()
        or sending.cancelled()
        or sending.exception() is not None
        or not sending.result()
    )
    if lost:
        logger.error(
            "%s: %d event(s) never reached the sockets, the channel layer failing: %s",
            what,
            lost.total(),
            ", ".join(
                f"{kind} for session {session}" + (f" (x{count})" if count > 1 else "")
                for (kind, session), count in lost.items()
            ),
        )


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
    close = delivering(close_sockets, what=f"closing the sockets of session {session_id}")
    transaction.on_commit(lambda: async_to_sync(close)(session_id), robust=True)
