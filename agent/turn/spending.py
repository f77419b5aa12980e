"""Each user's daily budget (`AGENT_USER_DAILY_BUDGET`, or their own, which staff set in the
admin): what their runs may cost per UTC day.

A user past it starts no turn at any door, until the next UTC day: the chat and the command
line are told why, the API answers 429, a cron run is recorded as skipped with why, `spawn`
and `subagent` refuse, and the announcement of a sub-agent that finished is its answer as it
gave it. Slash commands cost nothing and always go through (`/new` archives without asking
the model for a summary then).

Every model call of a user with a budget is reserved before it is made and settled after
(`TurnSpending`, which the loop and the consolidation ask): it starts only while what the
user's runs cost today and what their running work holds (`sessions_app.holds`) is below the
budget, and holds the most it may cost until it has answered, then what it did cost until
its run ends. Turns of one user that run at once, in any process, thus pass the budget by
one call's cost at most, as one turn alone does: that call finishes, and the turn then stops
with a plain message instead of calling the model again. Every check at a door counts what
running work holds too.

Each check reads the user's own budget (`sessions_app.usage.budget_limit`), and only when a
budget applies the day's ledger lines and the holds: one small indexed query, or two. A
model without a known price reserves nothing, and its runs do not count.
"""

from __future__ import annotations

import math
import uuid
from decimal import Decimal

from django.contrib.auth.models import User
from django.utils import timezone

from agent.llm import LLM
from agent.loop import LoopResult
from agent.turn.db import on_db
from agent.turn.refusals import TurnError
from sessions_app import holds, usage
from sessions_app.usage import BudgetState
from teams_app.policy import Budgets, budgets_of
from teams_app.selectors import team_spent


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


def limit_of(user_id: int, budgets: Budgets | None = None) -> Decimal | None:
    """The user's daily budget: the one staff set for them, else their teams' budget for
    each member (under the site's), else the site's; None when none applies."""
    budgets = budgets or budgets_of(user_id)
    member = float(budgets.member or 0)
    return usage.budget_limit(user_id=user_id, site_budget=member)


def state_of(user_id: int, budgets: Budgets | None = None) -> BudgetState:
    """The user's budget, and when one applies what their runs cost today with what their
    running work holds (else 0: unread). Their budget is the one staff set for them, else
    their teams' budget for each member, else the site's (`teams_app.policy`)."""
    limit = limit_of(user_id, budgets)
    if limit is None:
        return BudgetState(limit=None, spent=Decimal(0))
    spent, held = holds.spent_apart(user_id=user_id, day=usage.today())
    return BudgetState(limit=limit, spent=spent, held=held)


def _how_much(spent: Decimal, held: Decimal, *, whose: str = "your") -> str:
    """What counts against a budget, in words: all of it since 00:00 UTC, and how much of
    that turns still running hold (the most their calls may cost, which they may not all
    spend)."""
    said = f"{dollars(spent + held)} since 00:00 UTC"
    if held:
        said += f", {dollars(held)} of it held for {whose} turns still running"
    return said


def over_budget(user: User | None, *, whose: str = "Your") -> OverBudget | None:
    """Why `user` may start no turn now (their budget is spent), or None. `whose` begins the
    sentence: "Your" for the person at a door, the user's name for their background work.
    What their turns still running have spent and hold counts (`state_of`)."""
    if user is None:
        return None
    budgets = budgets_of(user.pk)
    state = state_of(user.pk, budgets)
    if state.limit is None or not state.exceeded:
        return _team_over_budget(budgets, whose)
    their = "your" if whose == "Your" else "their"
    message = (
        f"{whose} daily budget of {dollars(state.limit)} is spent "
        f"({_how_much(state.spent, state.held, whose=their)}); {_renews()}"
    )
    return OverBudget(message, retry_after=_until_tomorrow())


def _team_over_budget(budgets: Budgets, whose: str) -> OverBudget | None:
    """Why the person's turns stop because one of their teams spent its own budget today:
    a team's budget is the team's money, whichever other teams the person is in."""
    for slug, limit in budgets.teams:
        spent = team_spent(slug=slug, day=usage.today())
        if spent >= limit:
            team = f"{'Your' if whose == 'Your' else whose + chr(39) + 's'} team {slug}"
            return OverBudget(
                f"{team}'s daily budget of {dollars(limit)} is spent ({dollars(spent)} since "
                f"00:00 UTC, by all its members); {_renews()}",
                retry_after=_until_tomorrow(),
            )
    return None


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


async def past_budget(user: User | None) -> str | None:
    """Why the user's own work (a cron run, a sub-agent) does not start, or None."""
    if user is None:
        return None
    whose = f"{user.get_username()}'s"
    refusal = await on_db(over_budget)(user, whose=whose)
    return None if refusal is None else str(refusal)


def _dollars_of(amount: float | None) -> Decimal:
    # To a millionth of a dollar, as runs' costs are kept.
    return Decimal(str(round(amount or 0.0, 6)))


class TurnSpending:
    """The loop's `Spending` for the work of a user with a daily budget (`limit`) with one
    model (`llm`): a turn, whose hold is its run's id, or a consolidation, with a hold of its
    own. `reserve` holds the most a call may cost (all it sends at the prompt price, and as
    much as it may write at the completion price) while what the user's runs cost today and
    what all their work holds is below the budget, or answers the reply that ends the turn;
    `settle` leaves the hold with what the call did cost. One small statement each (on
    PostgreSQL a reservation takes a lock of the user's first); the end of the work lets go
    of its hold, in the transaction that adds it to the ledger. A budget changed meanwhile
    counts from the user's next turn."""

    def __init__(self, *, llm: LLM, owner_id: int, limit: Decimal, hold_id: uuid.UUID) -> None:
        self.llm = llm
        self.owner_id = owner_id
        self.limit = limit
        self.hold_id = hold_id
        # What the call under way holds (None: its model has no known price).
        self.reserved: Decimal | None = None

    async def reserve(self, prompt_tokens: int, done: LoopResult) -> str | None:
        most = {"prompt_tokens": prompt_tokens, "completion_tokens": await self.llm.output_tokens()}
        estimate = await self.llm.cost_of(most)
        self.reserved = None
        if estimate is None:  # a model with no known price holds nothing, as it counts nothing
            spent, held = await on_db(holds.spent_apart)(user_id=self.owner_id, day=usage.today())
            if spent + held < self.limit:
                return None
            return self.refusal(spent, held, started=done.iterations)
        reserved = _dollars_of(estimate)
        fits = await on_db(holds.reserve)(
            hold_id=self.hold_id,
            owner_id=self.owner_id,
            amount=reserved,
            limit=self.limit,
            day=usage.today(),
        )
        if fits:
            self.reserved = reserved
            return None
        spent, held = await on_db(holds.spent_apart)(user_id=self.owner_id, day=usage.today())
        return self.refusal(spent, held, started=done.iterations)

    async def settle(self, cost: float | None) -> None:
        change = _dollars_of(cost) - (self.reserved or 0)
        self.reserved = None
        if change:
            await on_db(holds.settle)(hold_id=self.hold_id, owner_id=self.owner_id, change=change)

    def refusal(self, spent: Decimal, held: Decimal, *, started: int) -> str:
        """The reply that ends a turn whose next model call does not fit: what its user's
        runs cost today (`spent`) and what their work holds (`held`, this turn's included)
        has reached the budget; `started`: the calls the turn made before it."""
        budget, how_much = dollars(self.limit), _how_much(spent, held)
        if not started:
            return (
                f"I did not start: your daily budget of {budget} is spent ({how_much}), so I "
                f"make no model calls today; {_renews()}. Ask me again then."
            )
        return (
            f"I stopped here: your daily budget of {budget} is spent ({how_much}), so I make "
            f"no more model calls today; {_renews()}. Ask me to continue then."
        )


async def spending_of(
    llm: LLM, owner_id: int | None, *, hold_id: uuid.UUID | None = None
) -> TurnSpending | None:
    """What the loop asks before and after each model call (of `llm`) of the user's work:
    a run's, whose id `hold_id` is, or a consolidation's, when None. None when no budget
    applies to them: then their calls cost no query at all."""
    if owner_id is None:
        return None
    limit = await on_db(limit_of)(owner_id)
    if limit is None:
        return None
    return TurnSpending(llm=llm, owner_id=owner_id, limit=limit, hold_id=hold_id or uuid.uuid4())
