"""Usage and cost on the API, over real HTTP to a daphne process: each session's usage summed
over its runs, `GET /api/usage` per UTC day and per model, its bad input, and the 429 of a
user past their daily budget."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import login_token
from tests.llm_server import ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)

USAGE = {"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500}
PRICES = json.dumps({"openai/scripted": {"input": 0.5, "output": 1.5}})
COST = 1000 * 0.5e-6 + 500 * 1.5e-6  # $0.00125 a call


@pytest.fixture
def priced(site_env: dict[str, str]) -> None:
    # openai/unpriced: a second model the operator gave no price, which litellm has none for.
    site_env["AGENT_MODEL_PRICES"] = PRICES
    site_env["AGENT_MODELS"] = "openai/unpriced"


@pytest.fixture
def api(priced: None, live_site: str, site_env: dict[str, str]) -> Iterator[httpx.Client]:
    token = login_token(site_env)
    headers = {"Authorization": f"Token {token}"}
    with httpx.Client(base_url=live_site, headers=headers, timeout=60) as client:
        yield client


def task(api: httpx.Client, prompt: str, **fields: Any) -> dict[str, Any]:
    answer = api.post("/api/tasks", json={"prompt": prompt, **fields})
    assert answer.status_code == 200, answer.text
    return answer.json()


def usage(calls: int, *, priced: int | None = None, unpriced_runs: int = 0) -> dict[str, Any]:
    """The usage of `calls` scripted calls, `priced` of them at the operator's price."""
    priced = calls if priced is None else priced
    return {
        **{key: calls * value for key, value in USAGE.items()},
        "cost": None if unpriced_runs else pytest.approx(priced * COST),
        "priced_cost": pytest.approx(priced * COST),
        "unpriced_runs": unpriced_runs,
    }


def test_a_sessions_usage_is_summed_over_its_runs(api: httpx.Client, llm: ScriptedLLM) -> None:
    llm.tool_call("list_dir", {"path": "."}, usage=USAGE).reply("one", usage=USAGE)
    first = task(api, "look around", session="api:sum")
    assert first["usage"] == usage(2)
    llm.reply("two", usage=USAGE)
    task(api, "and again", session="api:sum")
    llm.reply("elsewhere", usage=USAGE)
    task(api, "another chat", session="api:other")

    sessions = {entry["key"]: entry for entry in api.get("/api/sessions").json()}
    assert sessions["api:sum"]["usage"] == usage(3)
    assert sessions["api:other"]["usage"] == usage(1)
    assert api.get("/api/sessions/api:sum").json()["usage"] == usage(3)

    # A run of a model with no price: the session's total is no longer known, and says so.
    llm.reply("free?", usage=USAGE)
    unpriced = task(api, "once more", session="api:sum", model="openai/unpriced")
    assert unpriced["usage"] == {**usage(1, priced=0, unpriced_runs=1)}
    assert unpriced["usage"]["cost"] is None
    assert api.get("/api/sessions/api:sum").json()["usage"] == usage(4, priced=3, unpriced_runs=1)
    # A command calls no model and adds nothing.
    task(api, "/help", session="api:sum")
    assert api.get("/api/sessions/api:sum").json()["usage"]["total_tokens"] == 4 * 1500


def test_usage_per_day_and_model(api: httpx.Client, llm: ScriptedLLM) -> None:
    empty = api.get("/api/usage")
    assert empty.status_code == 200, empty.text
    report = empty.json()
    today = datetime.datetime.now(datetime.UTC).date()
    assert report["days"] == 30
    assert report["since"] == (today - datetime.timedelta(days=29)).isoformat()
    assert report["until"] == today.isoformat()
    assert report["total"] == {"runs": 0, **usage(0)}
    assert report["by_day"] == [] and report["by_model"] == []
    assert report["budget"]["daily"] is None and report["budget"]["left_today"] is None

    llm.reply("a", usage=USAGE).reply("b", usage=USAGE).reply("c", usage=USAGE)
    task(api, "one")
    task(api, "two", session="api:x")
    task(api, "three", model="openai/unpriced")
    report = api.get("/api/usage", params={"days": 7}).json()
    assert report["days"] == 7
    assert report["total"] == {"runs": 3, **usage(3, priced=2, unpriced_runs=1)}
    assert report["by_day"] == [
        {"day": today.isoformat(), "runs": 3, **usage(3, priced=2, unpriced_runs=1)}
    ]
    assert report["by_model"] == [
        {"model": "openai/scripted", "runs": 2, **usage(2)},
        {"model": "openai/unpriced", "runs": 1, **usage(1, priced=0, unpriced_runs=1)},
    ]
    assert report["budget"]["spent_today"] == pytest.approx(2 * COST)
    renews = datetime.datetime.fromisoformat(report["budget"]["renews"].replace("Z", "+00:00"))
    assert renews == datetime.datetime.combine(
        today + datetime.timedelta(days=1), datetime.time(0), tzinfo=datetime.UTC
    )


@pytest.mark.parametrize("days", ["0", "367", "-1", "abc", "1.5", ""])
def test_usage_refuses_a_bad_number_of_days(api: httpx.Client, days: str) -> None:
    answer = api.get("/api/usage", params={"days": days})
    assert answer.status_code == 400, answer.text
    assert list(answer.json()) == ["days"]


def test_usage_needs_a_login(api: httpx.Client, live_site: str) -> None:
    assert httpx.get(f"{live_site}/api/usage").status_code in (401, 403)
    assert api.get("/api/usage", params={"days": "366"}).status_code == 200


@pytest.fixture
def budget(site_env: dict[str, str]) -> None:
    site_env["AGENT_USER_DAILY_BUDGET"] = "0.001"  # less than one call of $0.00125


def test_a_user_past_the_budget_gets_429_with_why(
    budget: None, api: httpx.Client, llm: ScriptedLLM
) -> None:
    llm.reply("that was the last one", usage=USAGE)
    assert task(api, "spend it")["status"] == "succeeded"

    for body in ({"prompt": "more"}, {"prompt": "later", "wait": False}):
        refused = api.post("/api/tasks", json=body)
        assert refused.status_code == 429, refused.text
        reason = refused.json()["detail"]
        assert reason.startswith(
            "Your daily budget of $0.001 is spent ($0.00125 since 00:00 UTC); "
            "it renews at 00:00 UTC, in "
        )
        seconds = int(refused.headers["Retry-After"])
        assert 0 < seconds <= 86400
    assert len(llm.requests) == 1  # nothing more reached the model
    # Nothing was recorded for the refused tasks; a command still answers.
    assert len(api.get("/api/sessions").json()) == 1
    assert task(api, "/help")["status"] == "succeeded"
    report = api.get("/api/usage").json()
    assert report["budget"]["daily"] == 0.001
    assert report["budget"]["left_today"] == 0.0
