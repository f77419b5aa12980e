"""Holds on a user's daily budget (`sessions_app.holds`, `agent.turn.spending`): reservations
made at once from several threads, each on a connection of its own, see each other; a call
holds the most it may cost, then what it cost, until its run's end moves that into the
ledger; a model with no known price holds nothing."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from typing import Any, TypeVar

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.db import connections

from agent.loop import LoopResult
from agent.turn.spending import TurnSpending
from sessions_app import holds, services
from sessions_app import runs as run_records
from sessions_app.models import DailyUsage, SpendingHold
from sessions_app.usage import today
from tests.conftest import make_llm
from tests.llm_server import ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)

T = TypeVar("T")
NOTHING_DONE = LoopResult("", "succeeded", 0)


def in_threads(count: int, work: Callable[[], T]) -> list[T]:
    """`work` run by `count` threads at the same moment, each with its own connection."""
    start = threading.Barrier(count)

    def run() -> T:
        try:
            start.wait()
            return work()
        finally:
            connections.close_all()

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(lambda _: run(), range(count)))


def held(user: User) -> Decimal:
    return sum(holds.spent_apart(user_id=user.pk, day=today()), Decimal(0))


def test_reservations_made_at_once_each_see_the_ones_before(ada: User) -> None:
    def take() -> bool:
        return holds.reserve(
            hold_id=uuid.uuid4(),
            owner_id=ada.pk,
            amount=Decimal("0.3"),
            limit=Decimal(1),
            day=today(),
        )

    taken = in_threads(8, take)
    # Each goes on while less than the budget is held: 0, 0.3, 0.6 and 0.9; no more.
    assert taken.count(True) == 4
    assert held(ada) == Decimal("1.2")


def test_a_call_holds_its_most_then_its_cost_until_its_run_ends(
    ada: User, llm: ScriptedLLM
) -> None:
    session = services.get_or_create_session(key="web:h", owner=ada)
    run = run_records.start_new_run(session=session, channel="web", prompt="hi", model="m")
    # $1 and $2 a million tokens: 1,000 sent and at most 500 written hold $0.002.
    model = make_llm(llm, price=(1e-6, 2e-6), max_tokens=500)
    spending = TurnSpending(llm=model, owner_id=ada.pk, limit=Decimal(1), hold_id=run.pk)
    assert async_to_sync(spending.reserve)(1000, NOTHING_DONE) is None
    assert SpendingHold.objects.get(pk=run.pk).amount == Decimal("0.002")
    async_to_sync(spending.settle)(0.0015)
    assert SpendingHold.objects.get(pk=run.pk).amount == Decimal("0.0015")
    assert held(ada) == Decimal("0.0015")

    run_records.finish_run(
        run=run, status="succeeded", text="ok", usage={"total_tokens": 9}, cost=0.0015
    )
    assert not SpendingHold.objects.exists()
    assert DailyUsage.objects.get(owner=ada).priced_cost == Decimal("0.0015")
    assert held(ada) == Decimal("0.0015")


def test_a_model_with_no_price_holds_nothing_and_stops_once_the_budget_is_spent(
    ada: User, llm: ScriptedLLM
) -> None:
    spending = TurnSpending(
        llm=make_llm(llm), owner_id=ada.pk, limit=Decimal("0.01"), hold_id=uuid.uuid4()
    )
    assert async_to_sync(spending.reserve)(1000, NOTHING_DONE) is None
    async_to_sync(spending.settle)(None)
    assert not SpendingHold.objects.exists()

    holds.reserve(
        hold_id=uuid.uuid4(), owner_id=ada.pk, amount=Decimal("0.02"), limit=Decimal(1), day=today()
    )
    done = LoopResult("", "succeeded", 2)
    refusal = async_to_sync(spending.reserve)(1000, done)
    assert refusal is not None and refusal.startswith(
        "I stopped here: your daily budget of $0.01 is spent ($0.02 since 00:00 UTC, $0.02 of "
        "it held for your turns still running), so I make no more model calls today; it "
        "renews at 00:00 UTC, in "
    )


def test_a_hold_past_its_time_counts_no_more_and_the_sweep_takes_it(
    ada: User, settings: Any
) -> None:
    hold_id = uuid.uuid4()
    holds.reserve(
        hold_id=hold_id, owner_id=ada.pk, amount=Decimal("0.5"), limit=Decimal(1), day=today()
    )
    assert held(ada) == Decimal("0.5")
    from datetime import timedelta

    from django.utils import timezone

    SpendingHold.objects.update(expires=timezone.now() - timedelta(seconds=1))
    assert held(ada) == 0
    assert run_records.fail_dead_runs() == []
    assert not SpendingHold.objects.exists()


def test_a_turn_that_lives_or_waits_past_the_hour_keeps_its_hold(ada: User) -> None:
    """A hold lapsed an hour after its turn's last model call: a turn in one long command,
    or waiting for a person's answer all afternoon, stopped counting what it had cost."""
    from datetime import timedelta

    from django.utils import timezone

    from sessions_app.approvals import PendingCall, park_run

    session = services.get_or_create_session(key="web:long", owner=ada)
    runs = [
        run_records.start_new_run(session=session, channel="web", prompt="hi", model="m")
        for _ in range(2)
    ]
    for run in runs:
        holds.reserve(
            hold_id=run.pk, owner_id=ada.pk, amount=Decimal("0.5"), limit=Decimal(9), day=today()
        )
    nearly_gone = timezone.now() + timedelta(seconds=5)
    SpendingHold.objects.update(expires=nearly_gone)
    alive, waiting = runs

    run_records.mark_alive(run_ids=[alive.pk])
    park_run(
        run=waiting,
        pending=[PendingCall("c1", "exec", {"command": "ls"}, 0)],
        timeout=86_400,
        stopped_result="stopped",
        iterations=1,
        tools_used=[],
        usage={},
        cost=0.5,
    )

    expires = dict(SpendingHold.objects.values_list("id", "expires"))
    assert expires[alive.pk] >= timezone.now() + timedelta(seconds=holds.HOLD_SECONDS - 60)
    assert expires[waiting.pk] >= timezone.now() + timedelta(days=1)
