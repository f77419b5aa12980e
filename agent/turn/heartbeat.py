"""The heartbeat: now and then the agent looks at `<workspace>/HEARTBEAT.md` on its own.

A file with no open tasks (missing, empty, only headings, comments and ticked boxes) costs
nothing: no turn, no model call. Otherwise a turn runs in the session `heartbeat`, without
its history, and whatever it finds worth saying reaches the owner's latest web chat.
"""

from __future__ import annotations

import logging

from agent import context
from agent.conf import AgentSettings
from agent.turn import store
from agent.turn.delivery import post
from agent.turn.fanout import GroupSink

logger = logging.getLogger(__name__)

FILE = "HEARTBEAT.md"
SESSION_KEY = "heartbeat"
FILE_CHARS = 20_000


async def beat(conf: AgentSettings) -> str:
    """One heartbeat; what came of it (`idle`, `skipped`, `quiet`, `delivered`, …)."""
    tasks = _open_tasks(conf)
    if not tasks:
        return "idle"
    if not conf.model:
        logger.warning("%s has open tasks but no model is configured", FILE)
        return "no model"
    owner = await store.heartbeat_owner(conf.heartbeat_user)
    if owner is None and conf.heartbeat_user:
        logger.warning("AGENT_HEARTBEAT_USER %r is not an active user", conf.heartbeat_user)
    session = await store.get_or_create_session(key=SESSION_KEY, owner=owner)
    run = await store.queue_run_unless_busy(
        session=session,
        channel=SESSION_KEY,
        prompt=context.heartbeat_message(tasks),
        model=session.model or conf.model,
    )
    if run is None:
        return "skipped"  # the last heartbeat is still at work
    from agent.turn.service import run_recorded

    target = await store.latest_session(owner=owner, channel="web")
    result = await run_recorded(run, owner=owner, emit=GroupSink(session.pk), reply_to=target)
    if result.delivered:  # the model sent its news itself, with the message tool
        return "delivered" if target is not None else "kept"
    text = result.text.strip()
    if not result.success or not text or context.HEARTBEAT_OK in text:
        return "quiet" if result.success else result.status
    if target is None:
        logger.info(
            "the heartbeat has news but %s has no web chat; it stays in %s", owner, SESSION_KEY
        )
        return "kept"
    await post(target, text)
    return "delivered"


def _open_tasks(conf: AgentSettings) -> str:
    path = conf.workspace / FILE
    try:
        text = path.read_text(encoding="utf-8", errors="replace")[:FILE_CHARS]
    except FileNotFoundError:
        return ""
    except OSError as exc:
        logger.warning("cannot read %s: %s", path, exc)
        return ""
    return context.open_tasks(text)
