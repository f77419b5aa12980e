"""The daily ledger behind usage and budgets: a run counted once however often its end is
written, kept when its conversation is deleted, filled from earlier runs on upgrade, read in
one query for a budget; and what the admin shows of it."""

from __future__ import annotations

import datetime
import importlib
from decimal import Decimal
from typing import Any

import pytest
from django.apps import apps
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from agent.turn.spending import state_of
from sessions_app import runs as run_records
from sessions_app import services
from sessions_app.models import DailyUsage, Run, UserBudget
from sessions_app.usage import BudgetState, budget_state, today

pytestmark = pytest.mark.django_db

USAGE = {"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500}


def finished_run(owner: User | None, key: str, *, cost: str | None, model: str = "openai/a") -> Run:
    session = services.get_or_create_session(key=key, owner=owner)
    run = run_records.start_new_run(session=session, channel="web", prompt="hi", model=model)
    return run_records.finish_run(
        run=run,
        status="succeeded",
        text="ok",
        usage=USAGE,
        cost=float(cost) if cost is not None else None,
    )


def test_a_run_is_counted_once_however_often_its_end_is_written(ada: User) -> None:
    run = finished_run(ada, "web:a", cost="0.5")
    # The write made again, as after a lost connection whose commit went through.
    run_records.finish_run(run=run, status="succeeded", text="ok", usage=USAGE, cost=0.5)
    line = DailyUsage.objects.get(owner=ada)
    assert (line.day, line.model, line.runs) == (today(), "openai/a", 1)
    assert (line.prompt_tokens, line.completion_tokens, line.total_tokens) == (1000, 500, 1500)
    assert (line.priced_cost, line.unpriced_runs) == (Decimal("0.5"), 0)


def test_runs_add_up_per_model_and_unpriced_ones_are_counted_apart(ada: User) -> None:
    finished_run(ada, "web:a", cost="0.5")
    finished_run(ada, "web:b", cost="0.25")
    finished_run(ada, "web:a", cost=None, model="openai/mine")
    finished_run(None, "cli:direct", cost="1")  # the command line's, of no account
    lines = {line.model: line for line in DailyUsage.objects.filter(owner=ada)}
    assert (lines["openai/a"].runs, lines["openai/a"].priced_cost) == (2, Decimal("0.75"))
    assert (lines["openai/mine"].runs, lines["openai/mine"].unpriced_runs) == (1, 1)
    assert lines["openai/mine"].priced_cost == 0
    assert DailyUsage.objects.get(owner=None).priced_cost == Decimal(1)
    # A run that called no model (a command's) adds nothing.
    session = services.get_or_create_session(key="web:c", owner=ada)
    run = run_records.start_new_run(session=session, channel="web", prompt="/help", model="x")
    run_records.finish_run(run=run, status="succeeded", text="help")
    assert DailyUsage.objects.filter(owner=ada).count() == 2


def test_deleting_a_conversation_does_not_give_back_what_it_cost(ada: User, settings: Any) -> None:
    settings.AGENT_USER_DAILY_BUDGET = 1.0
    run = finished_run(ada, "web:a", cost="1.5")
    services.delete_session(session=run.session)
    state = budget_state(user_id=ada.pk, site_budget=1.0)
    assert state.spent == Decimal("1.5") and state.exceeded


def test_a_budget_is_read_in_two_small_queries_and_the_ledger_only_when_one_applies(
    ada: User, django_assert_num_queries: Any
) -> None:
    finished_run(ada, "web:a", cost="0.5")
    finished_run(ada, "web:b", cost="0.25", model="openai/b")
    with django_assert_num_queries(2):
        state = budget_state(user_id=ada.pk, site_budget=2.0)
    assert (state.limit, state.spent, state.exceeded) == (Decimal(2), Decimal("0.75"), False)
    UserBudget.objects.create(user=ada, daily_budget=Decimal("0.5"))
    with django_assert_num_queries(2):
        assert budget_state(user_id=ada.pk, site_budget=0).exceeded
    UserBudget.objects.filter(user=ada).update(unlimited=True)
    assert budget_state(user_id=ada.pk, site_budget=0.1).limit is None
    # A turn's check, for someone with no budget: their teams' budgets, then their own.
    with django_assert_num_queries(2):
        assert state_of(ada.pk) == BudgetState(limit=None, spent=Decimal(0))
    # Yesterday's spending is yesterday's.
    DailyUsage.objects.update(day=today() - datetime.timedelta(days=1))
    assert budget_state(user_id=User.objects.create_user("bob").pk, site_budget=1).spent == 0
    UserBudget.objects.all().delete()
    assert budget_state(user_id=ada.pk, site_budget=0.1).spent == 0


def test_the_upgrade_counts_the_runs_recorded_before_it(ada: User) -> None:
    migration = importlib.import_module("sessions_app.migrations.0012_daily_usage")
    finished_run(ada, "web:a", cost="0.5")
    finished_run(ada, "web:a", cost=None)
    old = finished_run(ada, "web:b", cost="0.25")
    Run.objects.filter(pk=old.pk).update(finished=timezone.now() - datetime.timedelta(days=2))
    DailyUsage.objects.all().delete()
    Run.objects.update(counted=False)

    migration.count_earlier_runs(apps, None)
    lines = DailyUsage.objects.filter(owner=ada).order_by("day")
    assert [(line.day, line.runs, line.priced_cost, line.unpriced_runs) for line in lines] == [
        (today() - datetime.timedelta(days=2), 1, Decimal("0.25"), 0),
        (today(), 2, Decimal("0.5"), 1),
    ]
    assert not Run.objects.filter(counted=False).exists()


# -- the admin ------------------------------------------------------------------------------------


def test_the_session_list_shows_each_sessions_usage(admin_client: Client, ada: User) -> None:
    finished_run(ada, "web:a", cost="0.5")
    finished_run(ada, "web:a", cost="0.25")
    finished_run(ada, "web:b", cost=None)
    page = admin_client.get(reverse("admin:sessions_app_session_changelist"))
    text = page.content.decode()
    assert page.status_code == 200
    assert "3,000 tokens · $0.7500" in text
    assert "1,500 tokens · $0.0000 + 1 unpriced" in text
    # Sorting by it works.
    page = admin_client.get(reverse("admin:sessions_app_session_changelist"), {"o": "7"})
    assert page.status_code == 200


def test_staff_see_everyones_usage_with_totals(admin_client: Client, ada: User) -> None:
    bob = User.objects.create_user("bob")
    finished_run(ada, "web:a", cost="0.5")
    finished_run(bob, "web:b", cost="0.25")
    finished_run(bob, "web:b", cost=None, model="openai/mine")
    url = reverse("admin:sessions_app_dailyusage_changelist")
    page = admin_client.get(url)
    text = " ".join(page.content.decode().split())
    assert page.status_code == 200
    assert "<strong>3</strong> runs, <strong>4500</strong> tokens" in text
    assert "<strong>$0.7500</strong> and 1 runs of models with no known price" in text
    page = admin_client.get(url, {"owner__id__exact": ada.pk})
    text = " ".join(page.content.decode().split())
    assert "<strong>1</strong> runs, <strong>1500</strong> tokens" in text
    assert "<strong>$0.5000</strong>." in text
