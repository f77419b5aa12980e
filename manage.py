#!/usr/bin/env python
"""Django's command-line utility for agentsite."""

import gc
import os
import sys

# Starting up (Django, the apps, the command's module) allocates some 120 000 objects that
# live as long as the process; the collector would walk them about 170 times on the way,
# some 50 ms of a command-line turn, to find a few thousand to free. It is back on as the
# command begins (`Utility.fetch_command`).
gc.disable()

from django.core.management import BaseCommand, ManagementUtility  # noqa: E402


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


def _command(argv: list[str]) -> str:
    return argv[1] if len(argv) > 1 else ""


if __name__ == "__main__":
    main()
