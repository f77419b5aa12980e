"""One per-user limit on the turns a user's agent starts (`AGENT_TURN_RATE`): the web chat,
the API, the user's cron runs and sub-agents all count against it.

Each user has a sliding window of turn start times. With Redis (`REDIS_URL`) the window is
a sorted set there, checked and added to by one script that Redis runs whole, on its own
clock: every process of every host counts against the same window, and two of them taking
the last place at the same moment cannot both get it. Without Redis the window is a table
in a small SQLite file in the data folder, checked and added to in one exclusive
transaction: the web process and the worker's processes (where cron runs and sub-agents
start) count against the same window, as long as they share that folder, one host's. The
command line and the heartbeat are the operator's own and are not limited.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
import uuid
from contextlib import closing
from functools import cache as once
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.cache import cache

from agent.conf import agent_settings
from teams_app.policy import rate_of

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
    if oldest[2] == nil then
        return window_ms
    end
    return math.max(tonumber(oldest[2]) + window_ms - now_ms, 1)
end
redis.call('ZADD', KEYS[1], now_ms, ARGV[3])
redis.call('PEXPIRE', KEYS[1], window_ms)
return 0
"""

# The file of the window without Redis, in the data folder.
WINDOW_FILE = "turns.sqlite3"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS turn (key TEXT NOT NULL, started REAL NOT NULL, expires REAL NOT NULL);
CREATE INDEX IF NOT EXISTS turn_key ON turn (key, started);
CREATE INDEX IF NOT EXISTS turn_expires ON turn (expires);
"""

# The threads of one process wait here rather than in SQLite's busy loop, which sleeps.
_local = threading.Lock()
_made: set[Path] = set()


def parse_rate(rate: str) -> tuple[int, int]:
    """`"30/min"` → (30, 60): how many turns in how many seconds (DRF's rate syntax)."""
    count, _, period = rate.partition("/")
    try:
        return int(count), _PERIODS[period.strip()[:1].lower()]
    except (ValueError, KeyError):
        raise ValueError(f"a rate looks like 30/min or 500/day, not {rate!r}") from None


def take_turn_slot(user_id: int, *, rate: str | None = None) -> float | None:
    """Count one turn for the user: None when it may start, else seconds to wait. Their
    rate is `rate`, else their teams' (`teams_app.policy`, under AGENT_TURN_RATE)."""
    count, window = parse_rate(rate or rate_of(user_id))
    # The cache's key prefix keeps sites (and test runs) that share a store apart.
    key = cache.make_key(f"agent:turns:{user_id}")
    if settings.REDIS_URL:
        return _take_in_redis(settings.REDIS_URL, key, count, window)
    return _take_here(Path(settings.DATA_DIR) / WINDOW_FILE, key, count, window)


def past_rate(username: str) -> str:
    """Why a turn the user's own work would start (a cron run, a sub-agent) does not."""
    return f"{username} is past their turn rate of {agent_settings().turn_rate}"


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


def _take_here(path: Path, key: str, count: int, window: int) -> float | None:
    try:
        with _local, closing(_open(path)) as db:
            # IMMEDIATE: the write lock first, so that the count and the insert are one step
            # for every process that opens the file.
            db.execute("BEGIN IMMEDIATE")
            try:
                wait = _take_in(db, key, count, window)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            return wait
    except sqlite3.Error:
        # The data folder unwritable or its disk full: as with Redis away, the turn starts.
        logger.warning("could not count a turn against the rate limit in %s", path, exc_info=True)
        return None


def _take_in(db: sqlite3.Connection, key: str, count: int, window: int) -> float | None:
    now = time.time()  # under the lock: starts are written in the order they are taken
    db.execute("DELETE FROM turn WHERE expires <= ?", (now,))
    held, oldest = db.execute(
        "SELECT count(*), min(started) FROM turn WHERE key = ? AND started > ?",
        (key, now - window),
    ).fetchone()
    if held >= count:
        return float(window) if oldest is None else max(oldest + window - now, 0.001)
    db.execute("INSERT INTO turn VALUES (?, ?, ?)", (key, now, now + window))
    return None


def _open(path: Path) -> sqlite3.Connection:
    # A connection per call: a worker process is forked from the cluster's, and a
    # connection must not cross a fork.
    if path not in _made:
        path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, timeout=20, isolation_level=None)
    # A window lost to a power cut costs nothing; a sync per turn would.
    db.execute("PRAGMA synchronous = OFF")
    if path not in _made:
        db.executescript(_SCHEMA)
        _made.add(path)
    return db
