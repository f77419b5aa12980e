#!/usr/bin/env python
"""Django's command-line utility for agentsite."""

import atexit
import contextlib
import gc
import importlib
import io
import os
import sys
import threading

# How the process ends, as `__main__` below finds out; 1 if it never does (an uncaught error).
exit_status = 1


def end_at_once() -> None:
    """The last thing the process does. Registered before anything else is imported, it
    runs after every other exit handler (log handlers flushed, MCP servers stopped, spans
    exported) and after the threads were joined; what is left is the interpreter freeing
    its ~700 modules one object at a time, some 20 ms of every command-line turn, which the
    operating system does at once. Files still open are flushed first, which the teardown
    did not even promise: the standard streams, and any the command left open (objects made
    since start-up, a few thousand, are all `gc` still tracks once `gc.freeze` set the rest
    aside)."""
    files = (io.TextIOWrapper, io.BufferedWriter, io.BufferedRandom)
    left_open = [obj for obj in gc.get_objects() if type(obj) in files]
    for stream in (*left_open, sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # closed, or a pipe nobody reads
            stream.flush()
    os._exit(exit_status)


atexit.register(end_at_once)

# Starting up (Django, the apps, the command's module) allocates some 120 000 objects that
# live as long as the process; the collector would walk them about 170 times on the way,
# some 50 ms of a command-line turn, to find a few thousand to free. It is back on as the
# command begins (`Utility.fetch_command`).
gc.disable()

from django.core.management import BaseCommand, ManagementUtility  # noqa: E402

# What a command's first moments need and Django does not, loaded in a thread beside Django's
# start-up. aiohttp, the model client's HTTP stack, reads the system's certificate bundle
# twice as it loads (for its two TLS contexts): some 50 ms that OpenSSL spends without the
# interpreter's lock, so that on a second core they cost a command-line turn nothing.
PRELOAD = {"agent": "aiohttp"}


class Utility(ManagementUtility):
    """`execute_from_command_line`'s own, which knows when start-up is over: the command to
    run is found once Django is set up and the command's module loaded."""

    def fetch_command(self, subcommand: str) -> BaseCommand:
        command = super().fetch_command(subcommand)
        # What start-up built is set aside for good, so that no collection walks it again.
        gc.freeze()
        gc.enable()
        return command


def main() -> None:
    preload(PRELOAD.get(_command(sys.argv)))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.db import DatabaseError

    from agentsite.database import UnappliedMigrations, explain

    try:
        Utility(sys.argv).execute()
    except (ImproperlyConfigured, UnappliedMigrations) as exc:
        # A configuration mistake, or a database not yet set up, is the user's to fix: say
        # what it is, without a traceback.
        sys.exit(f"error: {exc}")
    except DatabaseError as exc:
        # Most likely a command run before `migrate`, or a database that cannot be reached:
        # one line saying so. Anything else is a bug, whose traceback is wanted.
        reason = None if "--traceback" in sys.argv else explain(exc, _command(sys.argv))
        if reason is None:
            raise
        sys.exit(f"error: {reason}")


def preload(module: str | None) -> None:
    if module is None:
        return
    # asyncio first, here: the thread and Django's start-up both need it, and one package
    # imported from two threads at once is best avoided where avoiding it costs nothing.
    import asyncio  # noqa: F401

    threading.Thread(target=_import, args=(module,), name="preload", daemon=True).start()


def _import(module: str) -> None:
    try:
        importlib.import_module(module)
    except Exception:  # the command meets it again where it imports the module, and says so
        return


def _command(argv: list[str]) -> str:
    return argv[1] if len(argv) > 1 else ""


def status_of(code: object) -> int:
    """The exit status `sys.exit(code)` gives: 0 for None, an int as it is, 1 for a message
    (which the interpreter prints)."""
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


if __name__ == "__main__":
    try:
        main()
        exit_status = 0
    except SystemExit as done:
        exit_status = status_of(done.code)
        raise
    except KeyboardInterrupt:
        exit_status = 130
        raise
