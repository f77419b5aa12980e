"""Whether the database is ready for the site, and what to tell a person when it is not.

A newcomer's first command may well run before `migrate` (`make run` migrates first, a
command typed by hand does not): it gets one line saying what to do, never a traceback.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil

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
    importing the migration modules, unless every migration file is recorded as applied."""
    if _all_recorded(alias):
        return [], True
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connections[alias])
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    pending = [f"{migration.app_label}.{migration.name}" for migration, _ in plan]
    return pending, bool(executor.loader.applied_migrations)


def _all_recorded(alias: str) -> bool:
    """Whether every migration file of every app is in the table of applied migrations: the
    usual case, told by the files' names alone. Anything else (no table yet, a file not
    recorded, a squashed migration not marked) is for the migration plan to judge."""
    from django.apps import apps
    from django.db.migrations.loader import MigrationLoader
    from django.db.migrations.recorder import MigrationRecorder

    recorder = MigrationRecorder(connections[alias])
    if not recorder.has_table():
        return False
    applied = set(recorder.applied_migrations())
    for app_config in apps.get_app_configs():
        module_name, _explicit = MigrationLoader.migrations_module(app_config.label)
        if module_name is None:
            continue
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:  # an app without migrations
                continue
            return False
        for entry in pkgutil.iter_modules(getattr(module, "__path__", [])):
            if entry.ispkg or entry.name[0] in "_~":
                continue
            if (app_config.label, entry.name) not in applied:
                return False
    return True


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
