"""What kind of turn a run is, read from its channel: what it may use and remember.

A chat turn (web, api, cli, or the `system` channel's announcements) has every tool and the
session's history. The others are turns the agent runs on its own, each with less.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Profile:
    # Tools the turn's model is not offered.
    hidden_tools: frozenset[str] = frozenset()
    # Whether the session's earlier messages are part of the context.
    history: bool = True
    # A sub-agent: its own prompt and iteration cap, and no sub-agents of its own.
    subagent: bool = False
    # Whether the `cron` tool may add and change jobs.
    schedules: bool = True
    # Whether a person can be asked whether a tool may run (`agent.turn.approvals`): a turn
    # the agent runs on its own is refused such a tool instead.
    asks: bool = True


CHAT = Profile()
SUBAGENT = Profile(
    hidden_tools=frozenset({"message", "spawn", "cron", "subagent"}),
    history=False,
    subagent=True,
    schedules=False,
    asks=False,
)
# A cron run cannot schedule more jobs; what it spawned would report to a session nobody
# reads, so it runs sub-agents inline only.
CRON = Profile(hidden_tools=frozenset({"cron", "spawn"}), schedules=False, asks=False)
HEARTBEAT = Profile(
    hidden_tools=frozenset({"cron", "spawn"}), history=False, schedules=False, asks=False
)

_BY_CHANNEL = {"subagent": SUBAGENT, "cron": CRON, "heartbeat": HEARTBEAT}


def profile_for(channel: str) -> Profile:
    return _BY_CHANNEL.get(channel, CHAT)
