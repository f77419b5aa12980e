"""The heartbeat: now and then each user's agent looks at the `HEARTBEAT.md` of that
user's own folder, on its own.

A file with no open tasks (missing, empty, only headings, comments and ticked boxes) costs
nothing: no turn, no model call. Otherwise a turn runs as that user (never as anyone else:
the file is theirs, and so are the memory and tools the turn gets) in their session
`heartbeat`, without its history, and whatever it finds worth saying reaches their latest
web chat.

What the heartbeat does, a turn of the agent's wrote: so it keeps to the limits of the turn
that last changed the file, by a file tool, a command or a link
(`UserPreferences.heartbeat_tools` and `heartbeat_approve_tools`, which the runner records,
`heartbeat_watch`): a task limited to some tools, or a chat where `exec` waits for a yes,
cannot write tasks that the heartbeat then carries out with every tool, unasked.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from agent import context
from agent.conf import AgentSettings
from agent.tools.guards.folders import user_folder
from agent.turn import store
from agent.turn.delivery import post
from agent.turn.fanout import GroupSink
from agent.turn.policies import person_settings
from agent.turn.service import run_recorded
from skills_app.workspace import read_plain_file

logger = logging.getLogger(__name__)

FILE = context.HEARTBEAT_FILE
SESSION_KEY = "heartbeat"
FILE_CHARS = 20_000


def heartbeat_users(conf: AgentSettings) -> list[Any]:
    """The active users whose own HEARTBEAT.md has open tasks. Reads the database and the
    file system: call it from sync code (a worker's task, a command)."""
    from django.contrib.auth import get_user_model

    if (conf.workspace / FILE).exists():
        logger.warning(
            "%s in the workspace's root is no longer read: each user's heartbeat reads the "
            "one in their own folder (users/<name>/%s); move it there",
            conf.workspace / FILE,
            FILE,
        )
    users = get_user_model().objects.filter(is_active=True).order_by("pk")
    return [user for user in users if open_tasks(conf, user.get_username())]


def open_tasks(conf: AgentSettings, username: str) -> str:
    """The open tasks of the user's HEARTBEAT.md; empty when there are none."""
    folder = user_folder(conf.workspace, username)
    # The user's agent writes this file, and might leave a link there instead: it is read
    # only if it stays inside their folder.
    text = read_plain_file(folder / FILE, FILE_CHARS, inside=folder)
    return context.open_tasks(text) if text else ""


async def user_heartbeat(conf: AgentSettings, user: Any) -> str:
    """One heartbeat of `user`; what came of it (`idle`, `skipped`, `quiet`, `delivered`…)."""
    tasks = await asyncio.to_thread(open_tasks, conf, user.get_username())
    if not tasks:
        return "idle"
    if not conf.model:
        logger.warning("%s of %s has open tasks but no model is configured", FILE, user)
        return "no model"
    session = await store.get_or_create_session(key=SESSION_KEY, owner=user)
    tools, approve_tools = await store.heartbeat_limits(user_id=user.pk)
    run = await store.queue_run_unless_busy(
        session=session,
        channel=SESSION_KEY,
        prompt=context.heartbeat_message(tasks),
        # The person's default when the session has no choice: their teams' may not be
        # the operator's.
        model=session.model or (await person_settings(user)).model,
        tools=tools,
        approve_tools=approve_tools,
    )
    if run is None:
        return "skipped"  # the last heartbeat is still at work
    target = await store.latest_session(owner=user, channel="web")
    result = await run_recorded(run, owner=user, emit=GroupSink(session.pk), reply_to=target)
    if result.delivered:  # the model sent its news itself, with the message tool
        return "delivered" if target is not None else "kept"
    text = result.text.strip()
    if not result.success or not text or context.HEARTBEAT_OK in text:
        return "quiet" if result.success else result.status
    if target is None:
        logger.info(
            "the heartbeat has news but %s has no web chat; it stays in %s", user, SESSION_KEY
        )
        return "kept"
    await post(target, text)
    return "delivered"
