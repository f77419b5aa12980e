"""What runs used and cost: the daily ledger (`DailyUsage`), sums per session, per UTC day
and per model, per team chat member, and each user's daily budget.

The rule for a cost that is not known: a run whose model has no price (neither litellm's
table nor AGENT_MODEL_PRICES names it) used tokens at an unknown cost. Any sum that holds
such a run has `cost` null, since its total cannot be known; `priced_cost` is what the runs
with a price cost, and `unpriced_runs` says how many had none. The daily budget counts
`priced_cost`: what is not priced cannot be counted, and an operator who wants a
self-hosted model counted gives it a price.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

from django.contrib.auth.models import User
from django.db import IntegrityError, connection, transaction
from django.db.models import BigIntegerField, Count, Q, QuerySet, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Coalesce
from django.utils import timezone

from sessions_app import holds
from sessions_app.models import DailyUsage, Run, UserBudget

TOKENS = ("prompt_tokens", "completion_tokens", "total_tokens")
ZERO = Decimal(0)


def today() -> date:
    """The UTC day now, which budgets and the ledger count by."""
    return timezone.now().astimezone(UTC).date()


def next_day_starts() -> datetime:
    return datetime.combine(today() + timedelta(days=1), time(0), tzinfo=UTC)


def usage_dict(
    *, prompt: int, completion: int, total: int, priced_cost: Decimal, unpriced_runs: int
) -> dict[str, Any]:
    """A sum of usage as the API, the admin and the chat page show it (see the module's
    rule for `cost`)."""
    priced = float(priced_cost)
    return {
        "prompt_tokens": int(prompt),
        "completion_tokens": int(completion),
        "total_tokens": int(total),
        "cost": None if unpriced_runs else priced,
        "priced_cost": priced,
        "unpriced_runs": int(unpriced_runs),
    }


def run_usage(run: Run) -> dict[str, Any]:
    """One run's usage, by the same rule."""
    used = run.usage or {}
    tokens = {key: int(used.get(key) or 0) for key in TOKENS}
    unpriced = run.cost is None and _used_tokens(used)
    return usage_dict(
        prompt=tokens["prompt_tokens"],
        completion=tokens["completion_tokens"],
        total=tokens["total_tokens"],
        priced_cost=run.cost or ZERO,
        unpriced_runs=1 if unpriced else 0,
    )


def _used_tokens(usage: dict[str, Any]) -> bool:
    return any(int(usage.get(key) or 0) > 0 for key in TOKENS)


# ---- the ledger -------------------------------------------------------------------------


def record_run(*, run: Run, owner_id: int | None, held: bool = True) -> None:
    """Add what `run` used and cost to its owner's line for today and its model, and let go
    of what it held of their budget (`held`: it may have held some). Called in the
    transaction that records how the run ended; a run that called no model adds nothing."""
    if held:
        holds.release(hold_id=run.pk)
    used = run.usage or {}
    if run.cost is None and not _used_tokens(used):
        return
    add_usage(
        owner_id=owner_id,
        model=run.model,
        usage=used,
        cost=run.cost,
    )


def add_usage(
    *, owner_id: int | None, model: str, usage: dict[str, Any], cost: Decimal | None
) -> None:
    """Add one run's tokens and cost (None: its price is unknown) to today's line."""
    increments: dict[str, int | Decimal] = {key: int(usage.get(key) or 0) for key in TOKENS}
    increments["runs"] = 1
    if cost is not None:
        increments["priced_cost"] = cost
    elif _used_tokens(usage):
        increments["unpriced_runs"] = 1
    line = (owner_id, today(), model[:200])
    if _add_to_line(line, increments):
        return
    try:
        # The day's first run of this model: its line is made, unless another process made
        # it a moment ago, in which case that one is added to.
        with transaction.atomic():
            DailyUsage.objects.create(owner_id=line[0], day=line[1], model=line[2])
    except IntegrityError:
        pass
    _add_to_line(line, increments)


@transaction.atomic
def record_usage(
    *,
    owner_id: int | None,
    model: str,
    usage: dict[str, Any],
    cost: Decimal | None,
    hold_id: UUID | None = None,
) -> None:
    """Add the model calls of work that is no run (a consolidation's) to today's line, and
    let go of what that work held (`hold_id`), both at once."""
    if hold_id is not None:
        holds.release(hold_id=hold_id)
    if cost is not None or _used_tokens(usage):
        add_usage(owner_id=owner_id, model=model, usage=usage, cost=cost)


def _add_to_line(line: tuple[int | None, date, str], increments: dict[str, Any]) -> int:
    """Add `increments` to the columns of the ledger's line (owner, day, model); how many
    lines it added to, 0 or 1. Every run's ending makes this one statement, written out:
    built by the ORM from F() expressions, it took half a millisecond of CPU a run, ten
    times what the database spends on it."""
    quote = connection.ops.quote_name
    owner_id, day, model = line
    sets = ", ".join(f"{quote(column)} = {quote(column)} + %s" for column in increments)
    owner = "IS NULL" if owner_id is None else "= %s"
    sql = (
        f"UPDATE {quote(DailyUsage._meta.db_table)} SET {sets} "
        f"WHERE {quote('owner_id')} {owner} AND {quote('day')} = %s AND {quote('model')} = %s"
    )
    params = list(increments.values())
    if owner_id is not None:
        params.append(owner_id)
    params += [connection.ops.adapt_datefield_value(day), model]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


# ---- sums -------------------------------------------------------------------------------


def _token_sum(key: str) -> Coalesce:
    return Coalesce(Sum(Cast(KT(f"usage__{key}"), BigIntegerField())), 0)


def session_usage(*, session_ids: list[int]) -> dict[int, dict[str, Any]]:
    """The usage of each of the sessions, summed over their runs in one query."""
    unpriced = Q(cost__isnull=True) & (
        Q(usage__prompt_tokens__gt=0)
        | Q(usage__completion_tokens__gt=0)
        | Q(usage__total_tokens__gt=0)
    )
    rows = (
        Run.objects.filter(session_id__in=session_ids)
        .values("session_id")
        .annotate(
            prompt=_token_sum("prompt_tokens"),
            completion=_token_sum("completion_tokens"),
            total=_token_sum("total_tokens"),
            priced=Coalesce(Sum("cost"), ZERO),
            unpriced=Count("pk", filter=unpriced),
        )
        .order_by()
    )
    found = {
        row["session_id"]: usage_dict(
            prompt=row["prompt"],
            completion=row["completion"],
            total=row["total"],
            priced_cost=row["priced"],
            unpriced_runs=row["unpriced"],
        )
        for row in rows
    }
    nothing = usage_dict(prompt=0, completion=0, total=0, priced_cost=ZERO, unpriced_runs=0)
    return {pk: found.get(pk, nothing) for pk in session_ids}


_SUMS = {
    "runs_": Sum("runs"),
    "prompt": Sum("prompt_tokens"),
    "completion": Sum("completion_tokens"),
    "total": Sum("total_tokens"),
    "priced": Sum("priced_cost"),
    "unpriced": Sum("unpriced_runs"),
}


def _sums(lines: QuerySet[DailyUsage], *by: str) -> list[dict[str, Any]]:
    """The lines summed for each value of the fields `by`; without any, one sum of them all."""
    if by:
        rows: list[dict[str, Any]] = list(lines.values(*by).annotate(**_SUMS).order_by(*by))
    else:
        rows = [lines.aggregate(**_SUMS)]
    return [
        {
            **{key: row[key] for key in by},
            "runs": int(row["runs_"] or 0),
            **usage_dict(
                prompt=row["prompt"] or 0,
                completion=row["completion"] or 0,
                total=row["total"] or 0,
                priced_cost=row["priced"] or ZERO,
                unpriced_runs=row["unpriced"] or 0,
            ),
        }
        for row in rows
    ]


def first_day(days: int) -> date:
    """The first UTC day of the last `days` (today included)."""
    return today() - timedelta(days=days - 1)


def usage_report(*, owner: User, days: int) -> dict[str, Any]:
    """The owner's usage over the last `days` UTC days (today included): the total, each
    day that had any (oldest first) and each model."""
    first = first_day(days)
    lines = DailyUsage.objects.filter(owner=owner, day__gte=first)
    [total] = _sums(lines)
    by_day = _sums(lines, "day")
    for row in by_day:
        row["day"] = row["day"].isoformat()
    return {
        "days": days,
        "since": first.isoformat(),
        "until": today().isoformat(),
        "total": total,
        "by_day": by_day,
        "by_model": _sums(lines, "model"),
    }


# A run that called a model: the ledger counts no other.
_CALLED_A_MODEL = (
    Q(cost__isnull=False)
    | Q(usage__prompt_tokens__gt=0)
    | Q(usage__completion_tokens__gt=0)
    | Q(usage__total_tokens__gt=0)
)
_RUN_SUMS = {
    "runs_": Count("pk"),
    "prompt": _token_sum("prompt_tokens"),
    "completion": _token_sum("completion_tokens"),
    "total": _token_sum("total_tokens"),
    "priced": Coalesce(Sum("cost"), ZERO),
    "unpriced": Count("pk", filter=Q(cost__isnull=True)),
}


def team_chat_usage(*, team_ids: Collection[int], since: date) -> dict[int, dict[str, Any]]:
    """For each team (by its group's id): what the runs of its chats (their sub-agents'
    too) that ended from UTC day `since` on used, in all (`total`) and per member whose
    message started them (`members`, the most costly first), in one query.

    Read from the runs rather than the ledger, which counts a run against its author and
    not against the chat it ran in; the period is the ledger's all the same, a run counted
    on the day it ended. A member's line: `id` and `user` (their username; None for an
    account deleted since), `name`, `runs` (that called a model) and the usage sums."""
    start = datetime.combine(since, time(0), tzinfo=UTC)
    rows = (
        Run.objects.filter(session__team_id__in=list(team_ids), finished__gte=start)
        .filter(_CALLED_A_MODEL)
        .values(
            "session__team_id",
            "author_id",
            "author__username",
            "author__first_name",
            "author__last_name",
        )
        .annotate(**_RUN_SUMS)
        .order_by()
    )
    lines: dict[int, list[dict[str, Any]]] = {team_id: [] for team_id in team_ids}
    for row in rows:
        lines[row["session__team_id"]].append(dict(row))
    found = {}
    for team_id, members in lines.items():
        members.sort(key=lambda row: (-row["priced"], row["author__username"] or ""))
        total = {
            key: sum((row[key] for row in members), ZERO if key == "priced" else 0)
            for key in _RUN_SUMS
        }
        found[team_id] = {
            "total": _run_line(total),
            "members": [
                {
                    "id": row["author_id"],
                    "user": row["author__username"],
                    "name": _name(row),
                    **_run_line(row),
                }
                for row in members
            ],
        }
    return found


def _name(row: dict[str, Any]) -> str | None:
    full = f"{row['author__first_name'] or ''} {row['author__last_name'] or ''}".strip()
    return full or row["author__username"]


def _run_line(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "runs": int(row["runs_"]),
        **usage_dict(
            prompt=row["prompt"],
            completion=row["completion"],
            total=row["total"],
            priced_cost=row["priced"],
            unpriced_runs=row["unpriced"],
        ),
    }


# ---- the daily budget -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BudgetState:
    """A user's daily budget (None: none applies), what their runs cost today, and what
    their running work holds of it (`holds`), where it was read."""

    limit: Decimal | None
    spent: Decimal
    held: Decimal = Decimal(0)

    @property
    def counted(self) -> Decimal:
        """What counts against the budget: what was spent, and what is held."""
        return self.spent + self.held

    @property
    def exceeded(self) -> bool:
        return self.limit is not None and self.counted >= self.limit


def budget_state(*, user_id: int, site_budget: float) -> BudgetState:
    """The user's budget (`budget_limit`) and what their runs cost today."""
    return BudgetState(
        limit=budget_limit(user_id=user_id, site_budget=site_budget),
        spent=spent_today(user_id=user_id),
    )


def budget_limit(*, user_id: int, site_budget: float) -> Decimal | None:
    """The user's daily budget: their own, else the site's `site_budget` (0 for none); None
    when none applies."""
    own = (
        UserBudget.objects.filter(user_id=user_id).values_list("daily_budget", "unlimited").first()
    )
    if own is not None:
        daily, unlimited = own
        if unlimited:
            return None
        if daily is not None:
            return Decimal(daily)
    return Decimal(str(site_budget)) if site_budget > 0 else None


def spent_today(*, user_id: int) -> Decimal:
    """What the user's runs with a known price cost since 00:00 UTC."""
    lines = DailyUsage.objects.filter(owner_id=user_id, day=today())
    return Decimal(lines.aggregate(spent=Sum("priced_cost"))["spent"] or 0)
