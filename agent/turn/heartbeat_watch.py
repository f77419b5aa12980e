"""Which turn's limits the heartbeat keeps to (`agent.turn.heartbeat`): those of the turn
that last changed the user's HEARTBEAT.md.

A turn limited to some tools, or one where a tool waits for a person, must not leave tasks
in the file that the heartbeat then carries out with every tool, unasked. Whichever way the
file changed counts: a file tool's write, a command of `exec` (`echo … >> HEARTBEAT.md`), a
write through a link that the file is. The turn looks at the file's marks (its own, and its
target's when it is a link) when it starts and after each tool that may write; a change
records the turn's limits. A turn without limits lifts them only by writing the file itself
with a file tool, so that a change of another turn's, which it merely sees, never does.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path

logger = logging.getLogger(__name__)

Marks = tuple[int, ...] | None


def marks_of(path: Path) -> Marks:
    """What changes whenever the file at `path` changes, or it is replaced, or the file its
    link leads to changes; None when there is none."""
    try:
        own = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError:
        return (-1,)  # there, but not to be looked at: as good as changed
    marks: tuple[int, ...] = (own.st_ino, own.st_mtime_ns, own.st_ctime_ns, own.st_size)
    if stat.S_ISLNK(own.st_mode):
        try:
            target = os.stat(path)
        except OSError:
            return marks
        marks += (target.st_ino, target.st_mtime_ns, target.st_ctime_ns, target.st_size)
    return marks


class HeartbeatWatch:
    """One turn's watch over its user's HEARTBEAT.md at `path`. `limited` says whether the
    turn has limits to pass on; `record` records them as the heartbeat's."""

    def __init__(
        self, path: Path, *, limited: Callable[[], bool], record: Callable[[], Awaitable[None]]
    ) -> None:
        self.path = path
        self.limited = limited
        self.record = record
        self.seen = marks_of(path)

    async def look(self, written: Path | None = None) -> None:
        """After a tool that may have written: `written`, the file a file tool wrote (its
        resolved path), or None for a command that may have written anything."""
        now = marks_of(self.path)
        changed, self.seen = now != self.seen, now
        if written == self.path or (changed and self.limited()):
            logger.info("%s changed: the heartbeat keeps to this turn's limits", self.path)
            await self.record()
