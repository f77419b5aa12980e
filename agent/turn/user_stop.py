"""A deactivated user's work ends: their running turns stop as `/stop` stops them (this
process's and every other's, through the channel layer or, should it not reach them, the
flag each process's watcher polls), their queued turns never start, and their turns that
wait for a person end unanswered, every tab of theirs hearing so."""

from __future__ import annotations

import logging

from agent.turn.approvals import end_waiting
from agent.turn.db import on_db
from agent.turn.watch import announce_stop
from sessions_app import runs as run_records

logger = logging.getLogger(__name__)

_request_user_stop = on_db(run_records.request_user_stop)


async def stop_user_turns(*, user_id: int) -> int:
    """Stop every turn of user `user_id` that runs, waits in the queue or waits for a
    person; how many there were."""
    stop = await _request_user_stop(owner_id=user_id)
    ended = 0
    for session_id in stop.waiting_sessions:
        ended += len(await end_waiting(reason="stopped", session_id=session_id))
    await announce_stop(stop.running)
    if stop.asked or ended:
        logger.info("stopped %d turn(s) of user %s", stop.asked + ended, user_id)
    return stop.asked + ended
