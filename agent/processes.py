"""Whether a process still runs, by its pid."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """Whether process `pid` runs. One that has ended but that its parent has not reaped yet
    (a zombie, or an orphan its new parent has not waited for) does not, where /proc says so."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            # The state follows the command's name, in parentheses, which may hold anything.
            return stat.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False
    except OSError:  # no /proc here: a zombie counts as alive
        return _signalable(pid)


def _signalable(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
