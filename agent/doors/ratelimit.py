"""One per-user limit on the turns users start, shared by the API and the web chat.

Each user has a sliding window of turn start times in the cache (Redis when configured,
so every process counts against the same window). The command line, scheduled jobs and
sub-agents are the server's own doors and are not limited.
"""

from __future__ import annotations

import time

from django.conf import settings
from django.core.cache import cache

_PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_rate(rate: str) -> tuple[int, int]:
    """`"30/min"` → (30, 60): how many turns in how many seconds (DRF's rate syntax)."""
    count, _, period = rate.partition("/")
    try:
        return int(count), _PERIODS[period.strip()[:1].lower()]
    except (ValueError, KeyError):
        raise ValueError(f"a rate looks like 30/min or 500/day, not {rate!r}") from None


def take(user_id: int) -> float | None:
    """Count one turn for the user: None when it may start, else seconds to wait."""
    count, window = parse_rate(settings.AGENT_TURN_RATE)
    key = f"agent:turns:{user_id}"
    now = time.time()
    history = [started for started in cache.get(key, []) if started > now - window]
    if len(history) >= count:
        return max(history[0] + window - now, 0.001)
    history.append(now)
    cache.set(key, history, window)
    return None
