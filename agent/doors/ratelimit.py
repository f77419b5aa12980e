"""The per-user turn limit, as the chat and the API count against it. It lives with the turn
service (`agent.turn.ratelimit`), which counts a user's cron runs and sub-agents too."""

from __future__ import annotations

from agent.turn.ratelimit import parse_rate, past_rate, take

__all__ = ["parse_rate", "past_rate", "take"]
