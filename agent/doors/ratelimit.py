"""One per-user limit on the turns users start, shared by the API and the web chat.

Each user has a sliding window of turn start times. With Redis (`REDIS_URL`) the window is
a sorted set there, checked and added to by one script that Redis runs whole, on its own
clock: every web process counts against the same window, and two of them taking the last
place at the same moment cannot both get it. Without Redis the window is in this process's
cache, read and written under a lock; that setup serves the site from one web process. The
command line, scheduled jobs and sub-agents are the server's own doors and are not limited.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from functools import cache as once
from typing import Any

from django.conf import settings
from django.core.cache import cache

logger = logging.getLogger(__name__)

_PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}

# KEYS[1]: the user's window; ARGV: limit, window (s), a unique member. Returns 0 when the
# turn may start (it is counted), else the milliseconds until the oldest start leaves it.
_TAKE = """
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local limit = tonumber(ARGV[1])
local window_ms = tonumber(ARGV[2]) * 1000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms - window_ms)
if redis.call('ZCARD', KEYS[1]) >= limit then
    local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
    return math.max(tonumber(oldest[2]) + window_ms - now_ms, 1)
end
redis.call('ZADD', KEYS[1], now_ms, ARGV[3])
redis.call('PEXPIRE', KEYS[1], window_ms)
return 0
"""

_local = threading.Lock()


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
    # The cache's key prefix keeps sites (and test runs) that share a Redis apart.
    key = cache.make_key(f"agent:turns:{user_id}")
    if settings.REDIS_URL:
        return _take_in_redis(settings.REDIS_URL, key, count, window)
    return _take_here(key, count, window)


def _take_in_redis(url: str, key: str, count: int, window: int) -> float | None:
    import redis  # a fifth of a second to import, for sites with Redis only

    try:
        wait_ms = _script(url)(keys=[key], args=[count, window, uuid.uuid4().hex])
    except redis.RedisError:
        # Redis away for a moment: the turn may start, as it would were Redis the only
        # thing counting; the rest of the site is failing over that too.
        logger.warning("could not count a turn against the rate limit in Redis", exc_info=True)
        return None
    return None if not wait_ms else int(wait_ms) / 1000


@once
def _script(url: str) -> Any:
    """The limit's script on a client of its own (thread-safe, pooled), loaded once."""
    import redis

    client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
    return client.register_script(_TAKE)


def _take_here(key: str, count: int, window: int) -> float | None:
    # A socket's check runs on one of several threads: read and write the window as one.
    with _local:
        now = time.time()
        history = [started for started in cache.get(key, []) if started > now - window]
        if len(history) >= count:
            return max(history[0] + window - now, 0.001)
        history.append(now)
        cache.set(key, history, window)
        return None
