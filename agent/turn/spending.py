"""Each user's daily budget (`AGENT_USER_DAILY_BUDGET`, or their own, which staff set in the
admin): what their runs may cost per UTC day.

A user past it starts no turn at any door, until the next UTC day: the chat and the command
line are told why, the API answers 429, a cron run is recorded as skipped with why, `spawn`
and `subagent` refuse, and the announcement of a sub-agent that finished is its answer as it
gave it. A turn that crosses the budget midway finishes the model call it is in, then stops
with a plain message instead of calling the model again (`TurnBudget`, which the loop asks
between model calls). Slash commands cost nothing and always go through.

Each check reads the user's own budget (`sessions_app.usage.budget_limit`), and only when a
budget applies the day's ledger lines: one small indexed query, or two. Runs of a model
without a known price do not count.
"""

from __future__ import annotations

import math
from decimal import Decimal

from django.contrib.auth.models import User
from django.utils import timezone

from agent.conf import agent_settings
from agent.loop import LoopResult
from agent.turn.db import on_db
from agent.turn.refusals import TurnError
from sessions_app import usage
from sessions_app.usage import BudgetState


class OverBudget(TurnError):
    """The user's runs have cost their daily budget today. `retry_after`: seconds until the
    next UTC day, when it renews."""

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def dollars(amount: Decimal | float) -> str:
    """ "$5.00", "$0.50", "$0.00125": cents, or as many decimals as a small sum needs (six at
    most, as runs' costs are kept)."""
    value = Decimal(str(amount))
    if value >= 1:
        return f"${value:,.2f}"
    whole, _, decimals = f"{value:.6f}".rstrip("0").partition(".")
    return f"${whole}.{decimals.ljust(2, '0')}"


def _until_tomorrow() -> int:
    return max(1, math.ceil((usage.next_day_starts() - timezone.now()).total_seconds()))


def _renews() -> str:
    minutes = math.ceil(_until_tomorrow() / 60)
    hours, minutes = divmod(minutes, 60)
    after = f"{hours} h {minutes} min" if hours else f"{minutes} min"
    return f"it renews at 00:00 UTC, in {after}"


def state_of(user_id: int) -> BudgetState:
    """The user's budget, and what they spent today when one applies (else 0: unread)."""
    limit = usage.budget_limit(user_id=user_id, site_budget=agent_settings().user_daily_budget)
    if limit is None:
        return BudgetState(limit=None, spent=Decimal(0))
    return BudgetState(limit=limit, spent=usage.spent_today(user_id=user_id))


def over_budget(
    user: User | None, *, whose: str = "Your", besides: float = 0.0
) -> OverBudget | None:
    """Why `user` may start no turn now (their budget is spent), or None. `whose` begins the
    sentence: "Your" for the person at a door, the user's name for their background work;
    `besides` is what a turn still running has cost so far, which the ledger counts once it
    ends."""
    if user is None:
        return None
    state = state_of(user.pk)
    spent = state.spent + Decimal(str(besides))
    if state.limit is None or spent < state.limit:
        return None
    message = (
        f"{whose} daily budget of {dollars(state.limit)} is spent "
        f"({dollars(spent)} since 00:00 UTC); {_renews()}"
    )
    return OverBudget(message, retry_after=_until_tomorrow())


def check_budget(user: User | None) -> None:
    """Refuse a turn of `user`, whose budget is spent (`OverBudget`)."""
    refusal = over_budget(user)
    if refusal is not None:
        raise refusal


async def budget_refusal(user: User | None) -> OverBudget | None:
    """`over_budget` for async callers: why the person at a door may start no turn, or None."""
    if user is None:
        return None
    return await on_db(over_budget)(user)


async def past_budget(user: User | None, *, besides: float = 0.0) -> str | None:
    """Why the user's own work (a cron run, a sub-agent) does not start, or None; `besides`
    as for `over_budget` (the cost so far of the turn that would start it)."""
    if user is None:
        return None
    whose = f"{user.get_username()}'s"
    refusal = await on_db(over_budget)(user, whose=whose, besides=besides)
    return None if refusal is None else str(refusal)


class TurnBudget:
    """What the loop asks before each model call after a turn's first: None to go on, or
    the reply that ends the turn because the user's runs, this one included, have now cost
    their daily budget. A user with no budget at the first of them has none for the rest
    of the turn: a budget set meanwhile counts from their next turn, and their calls cost
    no query each."""

    def __init__(self, user_id: int) -> None:
        self.user_id = user_id
        self.unlimited = False

    async def __call__(self, result: LoopResult) -> str | None:
        if self.unlimited:
            return None
        state = await on_db(state_of)(self.user_id)
        if state.limit is None:
            self.unlimited = True
            return None
        # This run's cost is not in the ledger until it ends.
        spent = state.spent + Decimal(str(result.cost or 0))
        if spent < state.limit:
            return None
        return (
            f"I stopped here: your daily budget of {dollars(state.limit)} is spent "
            f"({dollars(spent)} since 00:00 UTC, this turn included), so I make no more "
            f"model calls today; {_renews()}. Ask me to continue then."
        )
