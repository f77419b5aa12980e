"""What running work holds of its users' daily budgets (`SpendingHold`), which every check
of a budget counts beside the day's ledger (`DailyUsage`).

A model call starts only while what its user's runs cost on the day and what all their
running work holds is below their budget; it then holds the most it may cost, and once it
has answered, its hold keeps what it did cost. Each reservation is decided in one step, so
that calls started at once, in any process, each see what the others hold: concurrent turns
pass the budget by one call's cost at most, as a single turn does. A run's hold goes in the
transaction that adds it to the ledger (`usage.record_run`), a consolidation's with its
usage (`usage.record_usage`), and a dead run's with the sweep (`release_dead`); any hold
past its `expires` counts no more.

The statements are written out: they run before and after every model call of a user with
a budget, where the ORM's building them would cost more than the database's running them.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from sessions_app.models import DailyUsage, SpendingHold

# How long a hold counts after its latest model call, or its turn's latest sign of life (the
# watch of running turns marks them alive every few seconds, `keep`); a turn that waits for
# a person keeps its hold until its calls' deadline and this long after. The sweep takes a
# dead run's long before: this is for a hold whose run left no record to sweep.
HOLD_SECONDS = 3600
# The first key of the advisory lock that puts a user's reservations in order on PostgreSQL
# ("spnd"); the session locks have theirs.
LOCK_KEY = int.from_bytes(b"spnd", "big")


def _q(name: str) -> str:
    return str(connection.ops.quote_name(name))


def _parts_sql(owner_id: int, day: date) -> tuple[str, str, list[Any]]:
    """SQL for what the owner's ledger says of `day`, and for what their unexpired holds
    hold, with the parameters of the two in turn."""
    spent = (
        f"(SELECT COALESCE(SUM({_q('priced_cost')}), 0) FROM {_q(DailyUsage._meta.db_table)} "
        f"WHERE {_q('owner_id')} = %s AND {_q('day')} = %s)"
    )
    held = (
        f"(SELECT COALESCE(SUM({_q('amount')}), 0) FROM {_q(SpendingHold._meta.db_table)} "
        f"WHERE {_q('owner_id')} = %s AND {_q('expires')} > %s)"
    )
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    return spent, held, [owner_id, connection.ops.adapt_datefield_value(day), owner_id, now]


def _spent_sql(owner_id: int, day: date) -> tuple[str, list[Any]]:
    """SQL for the ledger's and the holds' parts summed, with its parameters."""
    spent, held, params = _parts_sql(owner_id, day)
    return f"{spent} + {held}", params


def spent_apart(*, user_id: int, day: date) -> tuple[Decimal, Decimal]:
    """What the user's runs with a known price cost on `day` (the ledger), and what their
    running work holds now: one query."""
    spent, held, params = _parts_sql(user_id, day)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {spent}, {held}", params)
        row = cursor.fetchone()
    if not row:
        return Decimal(0), Decimal(0)
    return Decimal(str(row[0] or 0)), Decimal(str(row[1] or 0))


def _add_sql(condition: str) -> str:
    """SQL that adds to a hold (made if new) when `condition` holds."""
    table, amount, expires = _q(SpendingHold._meta.db_table), _q("amount"), _q("expires")
    # A bare parameter is text to SQLite, and text compares above any number: cast.
    return (
        f"INSERT INTO {table} ({_q('id')}, {_q('owner_id')}, {amount}, {expires}) "
        f"SELECT %s, %s, CAST(%s AS DECIMAL), %s WHERE {condition} "
        f"ON CONFLICT ({_q('id')}) DO UPDATE SET {amount} = {table}.{amount} + "
        f"excluded.{amount}, {expires} = excluded.{expires}"
    )


def _hold_params(hold_id: UUID, owner_id: int, amount: Decimal) -> list[Any]:
    expires = timezone.now() + timedelta(seconds=HOLD_SECONDS)
    return [
        SpendingHold._meta.pk.get_db_prep_value(hold_id, connection),
        owner_id,
        amount,
        connection.ops.adapt_datetimefield_value(expires),
    ]


@transaction.atomic
def reserve(*, hold_id: UUID, owner_id: int, amount: Decimal, limit: Decimal, day: date) -> bool:
    """Hold `amount` more for `hold_id` (a run's id, or a consolidation's own) if what the
    owner's runs cost on `day` and what all their work holds is below `limit`; whether it
    was. One statement: on SQLite under the database's one write lock; on PostgreSQL after
    a lock of the owner's, so that its sums see every reservation made before it (each
    statement there sees what was committed when it began)."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [LOCK_KEY, owner_id])
        spent, params = _spent_sql(owner_id, day)
        cursor.execute(
            _add_sql(f"{spent} < CAST(%s AS DECIMAL)"),
            [*_hold_params(hold_id, owner_id, amount), *params, limit],
        )
        return cursor.rowcount > 0


def settle(*, hold_id: UUID, owner_id: int, change: Decimal) -> None:
    """Change what `hold_id` holds by `change` (what a call cost less what was reserved for
    it). No lock: it lowers what the owner holds, or raises it by what one call cost beyond
    its reservation."""
    params = _hold_params(hold_id, owner_id, change)
    with connection.cursor() as cursor:
        if change > 0:
            cursor.execute(_add_sql("1 = 1"), params)
        elif change < 0:  # a hold swept meanwhile is not made again, below zero
            amount = _q("amount")
            cursor.execute(
                f"UPDATE {_q(SpendingHold._meta.db_table)} SET {amount} = {amount} + "
                f"CAST(%s AS DECIMAL), {_q('expires')} = %s WHERE {_q('id')} = %s",
                [params[2], params[3], params[0]],
            )


def release(*, hold_id: UUID) -> None:
    """Let go of what `hold_id` holds: its work ended, and what it cost is in the ledger."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {_q(SpendingHold._meta.db_table)} WHERE {_q('id')} = %s",
            [SpendingHold._meta.pk.get_db_prep_value(hold_id, connection)],
        )


def keep(*, hold_ids: Collection[UUID], until: datetime) -> None:
    """Let these holds count until `until` at least: their work is alive (a turn between two
    model calls longer than a hold's hour, in one long command), or waits for a person until
    then. Else what such a turn cost so far stopped counting till its end. A hold with more
    than half an hour's margin is left as it is: the watch marks its turns alive every few
    seconds, and each mark need not write every hold."""
    margin = timedelta(seconds=HOLD_SECONDS // 2)
    SpendingHold.objects.filter(pk__in=hold_ids, expires__lt=until - margin).update(expires=until)


def release_dead(*, run_ids: list[UUID]) -> int:
    """Let go of what the runs whose process died held, and of every hold past its time;
    how many holds went."""
    gone = Q(pk__in=run_ids) | Q(expires__lte=timezone.now())
    deleted: int = SpendingHold.objects.filter(gone).delete()[0]
    return deleted
