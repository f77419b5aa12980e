"""Whether the database is ready for the site, and what to tell a person when it is not.

A newcomer's first command may well run before `migrate` (`make run` migrates first, a
command typed by hand does not): it gets one line saying what to do, never a traceback.
"""

from __future__ import annotations

import logging

from django.db import DEFAULT_DB_ALIAS, DatabaseError, OperationalError, connections

logger = logging.getLogger(__name__)

MIGRATE_HINT = "run `python manage.py migrate`"


class UnappliedMigrations(Exception):
    """The database lacks tables the site needs; manage.py prints it as one line."""


def where(alias: str = DEFAULT_DB_ALIAS) -> str:
    """`the database at …`, naming it as a person would recognise it, without the password."""
    connection = connections[alias]
    config = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"the database at {config['NAME']}"
    user = f"{config['USER']}@" if config.get("USER") else ""
    port = f":{config['PORT']}" if config.get("PORT") else ""
    host = config.get("HOST") or "localhost"
    return f"the database at {connection.vendor}://{user}{host}{port}/{config['NAME']}"


def pending_migrations(alias: str = DEFAULT_DB_ALIAS) -> list[str]:
    """The migrations not yet applied, as `app.name`."""
    return _migration_state(alias)[0]


def _migration_state(alias: str) -> tuple[list[str], bool]:
    """The pending migrations, and whether any was applied before. About 20 ms, most of it
    importing the migration modules."""
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connections[alias])
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    pending = [f"{migration.app_label}.{migration.name}" for migration, _ in plan]
    return pending, bool(executor.loader.applied_migrations)


def unapplied_message(alias: str = DEFAULT_DB_ALIAS) -> str:
    return f"{where(alias)} has unapplied migrations: {MIGRATE_HINT}"


def require_migrated(alias: str = DEFAULT_DB_ALIAS) -> None:
    """Refuse to go on while migrations are pending: for commands that would otherwise
    start processes that fail, one after the other, on the missing tables."""
    if pending_migrations(alias):
        raise UnappliedMigrations(unapplied_message(alias))


def migrate_embedded(alias: str = DEFAULT_DB_ALIAS) -> str | None:
    """Migrate a SQLite database that needs it, and say so in a line; refuse any other.

    SQLite is the embedded default, a file of this install's own, so setting it up is safe
    to do unasked; a server database is somebody's to migrate when they choose to.
    """
    pending, used_before = _migration_state(alias)
    if not pending:
        return None
    if connections[alias].vendor != "sqlite":
        raise UnappliedMigrations(unapplied_message(alias))
    from django.core.management import call_command

    logger.info("applying %d migration(s) to %s", len(pending), where(alias))
    call_command("migrate", database=alias, interactive=False, verbosity=0)
    if used_before:
        return f"Applied {len(pending)} new migration(s) to {where(alias)}."
    return f"Set up {where(alias)}."


def explain(exc: DatabaseError, command: str, alias: str = DEFAULT_DB_ALIAS) -> str | None:
    """One line for a database error that a person can fix (migrations pending, the server
    unreachable or refusing), or None for one that is a bug and deserves its traceback."""
    # The command's connection may be left mid-transaction by the error: look afresh.
    connections.close_all()
    vendor = connections[alias].vendor
    # A server that cannot be reached would make a second look wait as long again; a missing
    # table is an OperationalError on SQLite only (a ProgrammingError elsewhere), and
    # connecting to a SQLite file never waits.
    if isinstance(exc, OperationalError) and vendor != "sqlite":
        return f"cannot use {where(alias)}: {_first_line(exc)}"
    try:
        pending = pending_migrations(alias)
    except DatabaseError as probe:
        return f"cannot use {where(alias)}: {_first_line(probe)}"
    finally:
        connections.close_all()
    if command == "migrate":
        # The database answers, so a migration failed: that is the thing to debug.
        return None
    if pending:
        return unapplied_message(alias)
    if isinstance(exc, OperationalError):
        return f"{where(alias)}: {_first_line(exc)}"
    return None


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0].strip() if lines else type(exc).__name__
