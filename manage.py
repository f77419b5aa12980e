#!/usr/bin/env python
"""Django's command-line utility for agentsite."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line
    from django.db import DatabaseError

    from agentsite.database import UnappliedMigrations, explain

    try:
        execute_from_command_line(sys.argv)
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
