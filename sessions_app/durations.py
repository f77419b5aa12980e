"""How long something took, as people read it: "350 ms", "1.2 s", "42 s", "3 min 5 s",
"2 h 4 min" (the chat page's tool cards say it the same way, `static/chat/util.js`)."""

from __future__ import annotations

from datetime import datetime


def duration_text(ms: float | None) -> str | None:
    """`ms` milliseconds in words; None for no duration (the admin then shows its dash)."""
    if ms is None:
        return None
    ms = max(round(ms), 0)
    if ms < 1000:
        return f"{ms} ms"
    if ms < 9950:
        return f"{ms / 1000:.1f} s"
    seconds = round(ms / 1000)
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def between(start: datetime | None, end: datetime | None) -> str | None:
    """The time from `start` to `end` in words; None while either is unknown."""
    if start is None or end is None:
        return None
    return duration_text((end - start).total_seconds() * 1000)
