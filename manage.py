#!/usr/bin/env python
"""Django's command-line utility for agentsite."""

import gc
import importlib
import os
import sys
import threading

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


if __name__ == "__main__":
    main()
