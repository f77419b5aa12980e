"""The channel-layer groups a turn's messages travel through.

A session's group holds every socket open on the session, in every process: the events
other tabs should see go there (`fanout`), and so do those a worker relays (`relay`). A
run's group reaches the one process running that run's turn, wherever it is: stops
(`watch`) and the requests of sockets that want the text so far (`live`) go there. A
user's group holds every socket the user has open, on any session: a change to their
access (deactivated, signed out, a token deleted) reaches them there (`fanout`).
"""

from __future__ import annotations

from uuid import UUID


def session_group(session_id: int) -> str:
    """The group of every socket open on session `session_id` (its row: a session deleted
    and made again under the same key is another group)."""
    return f"session.{session_id}"


def run_group(run_id: UUID) -> str:
    """The group that reaches whichever process runs `run_id`'s turn."""
    return f"run-stop.{run_id.hex}"


def user_group(user_id: int) -> str:
    """The group of every socket open for user `user_id`, in every process."""
    return f"user.{user_id}"
