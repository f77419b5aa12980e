"""The daily budget under concurrency and for consolidation, over a real daphne and a real
django-q2 cluster: turns of one user that run at once pass the budget by one call's cost at
most; what a running turn holds counts at the door; a dead run's hold goes with the sweep;
`/new` asks the model for no summary past the budget or the turn rate, and what its summary
cost is in the usage."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import httpx
import pytest

from tests.conftest import LOGIN, login_token
from tests.jobs import cluster, kill
from tests.llm_server import ScriptedLLM
from tests.test_background_live import query, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

# Dollars per million tokens: a call of USAGE costs $0.251, and the most one may cost (a
# prompt of a few thousand tokens, and AGENT_MAX_TOKENS written) a little more.
PRICES = json.dumps({"openai/scripted": {"input": 1, "output": 250}})
USAGE = {"prompt_tokens": 1000, "completion_tokens": 1000, "total_tokens": 2000}
CALL = Decimal("0.251")


@pytest.fixture
def priced(site_env: dict[str, str]) -> dict[str, str]:
    site_env.update(
        AGENT_MODEL_PRICES=PRICES,
        AGENT_USER_DAILY_BUDGET="1.00",
        AGENT_MAX_TOKENS="1000",
        AGENT_WORKERS="3",
    )
    return site_env


@pytest.fixture
def api(priced: dict[str, str], live_site: str) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Token {login_token(priced)}"}
    with httpx.Client(base_url=live_site, headers=headers, timeout=120) as client:
        yield client


def own_budget(env: dict[str, str], dollars: str) -> None:
    """Give the API's user a daily budget of their own, as staff do in the admin."""
    query(
        env,
        "from django.contrib.auth.models import User\n"
        "from sessions_app.models import UserBudget\n"
        f"user = User.objects.get(username={LOGIN[0]!r})\n"
        f"UserBudget.objects.create(user=user, daily_budget={dollars!r})\n"
        "result = True",
    )


def spent_today(api: httpx.Client) -> Decimal:
    """What the ledger holds of today: the runs (and consolidations) that ended."""
    total = api.get("/api/usage", params={"days": 1}).json()["total"]
    return Decimal(str(total["priced_cost"])).quantize(Decimal("0.000001"))


def finished(api: httpx.Client, task: dict[str, Any]) -> dict[str, Any]:
    return wait_for(
        lambda: (
            (found := api.get(f"/api/tasks/{task['id']}").json())["status"]
            not in ("queued", "running")
            and found
        ),
        timeout=120,
        what=f"task {task['id']} to end",
    )


def test_three_tasks_at_once_pass_the_budget_by_one_call_at_most(
    api: httpx.Client, priced: dict[str, str], llm: ScriptedLLM
) -> None:
    # Each turn would go on calling tools for as long as it may.
    for _ in range(30):
        llm.tool_call("list_dir", {"path": "."}, usage=USAGE, delay=0.5)
    tasks = []
    for number in range(3):
        queued = api.post(
            "/api/tasks",
            json={"prompt": "look around", "session": f"api:many{number}", "wait": False},
        )
        assert queued.status_code == 202, queued.text
        tasks.append(queued.json())
    with cluster(priced, graceful=False):
        ended = [finished(api, task) for task in tasks]

    spent = spent_today(api)
    # Alone, each turn would have made four calls, $1.004; three at once, three times that.
    assert Decimal("1.00") <= spent <= Decimal("1.00") + CALL, spent
    assert spent == CALL * len(llm.requests)
    for task in ended:
        assert task["status"] == "failed", task
        assert "daily budget of $1.00 is spent" in task["text"], task
    assert api.post("/api/tasks", json={"prompt": "more?"}).status_code == 429


def test_a_running_turn_holds_its_call_at_the_door_until_the_sweep_finds_it_dead(
    api: httpx.Client, priced: dict[str, str], llm: ScriptedLLM
) -> None:
    own_budget(priced, "0.20")  # less than the most one call may cost
    llm.hang(120)
    task = api.post("/api/tasks", json={"prompt": "think hard", "wait": False}).json()
    with cluster(priced) as doomed:
        wait_for(lambda: len(llm.requests) == 1, timeout=60, what="the model call")
        # Nothing has ended today, but the call under way may cost more than is left.
        refused = api.post("/api/tasks", json={"prompt": "and this?"})
        assert refused.status_code == 429, refused.text
        assert "daily budget of $0.20 is spent ($0.25" in refused.text
        kill(doomed)
    dead = query(
        priced,
        "from datetime import timedelta\n"
        "from django.utils import timezone\n"
        "from agent.job_functions import fail_dead_runs\n"
        "from sessions_app.models import Run, SpendingHold\n"
        "Run.objects.update(last_alive=timezone.now() - timedelta(minutes=5))\n"
        "result = [fail_dead_runs(), SpendingHold.objects.count()]",
    )
    assert dead == [1, 0]
    assert api.get(f"/api/tasks/{task['id']}").json()["status"] == "failed"
    llm.reply("Go ahead.", usage=USAGE)
    assert api.post("/api/tasks", json={"prompt": "and now?"}).status_code == 200


def test_new_past_the_budget_archives_without_asking_the_model(
    api: httpx.Client, priced: dict[str, str], llm: ScriptedLLM
) -> None:
    own_budget(priced, "0.25")
    llm.reply("Noted: tea, no sugar.", usage=USAGE)  # $0.251: the budget is spent
    api.post("/api/tasks", json={"prompt": "I take tea, no sugar", "session": "api:tea"})

    new = api.post("/api/tasks", json={"prompt": "/new", "session": "api:tea"})
    assert new.status_code == 200, new.text
    assert new.json()["text"] == "New conversation started (2 messages archived)."
    assert len(llm.requests) == 1
    [archive] = [m for m in api.get("/api/memory").json() if m["session"] == "api:tea"]
    assert archive["content"].startswith("Archived conversation:")
    assert "USER: I take tea, no sugar" in archive["content"]


@pytest.fixture
def one_turn_a_minute(priced: dict[str, str]) -> None:
    priced["AGENT_TURN_RATE"] = "1/min"


async def test_new_past_the_turn_rate_archives_without_asking_the_model(
    one_turn_a_minute: None,
    api: httpx.Client,
    priced: dict[str, str],
    live_site: str,
    llm: ScriptedLLM,
) -> None:
    import websockets

    url = live_site.replace("http", "ws") + f"/ws/chat/rate/?token={login_token(priced)}"
    llm.reply("Hello there.", usage=USAGE)
    async with websockets.connect(url, origin=live_site) as chat:
        assert json.loads(await chat.recv())["type"] == "history"
        await chat.send(json.dumps({"type": "message", "content": "hello"}))
        assert (await reply(chat))["content"] == "Hello there."
        await chat.send(json.dumps({"type": "message", "content": "/new"}))
        assert (await reply(chat))["content"] == "New conversation started (2 messages archived)."
    assert len(llm.requests) == 1
    memories = (await asyncio.to_thread(api.get, "/api/memory")).json()
    [archive] = [m for m in memories if m["session"] == "web:rate"]
    assert archive["content"].startswith("Archived conversation:")


async def reply(chat: Any) -> dict[str, Any]:
    while True:
        frame = json.loads(await chat.recv())
        assert frame["type"] != "error", frame
        if frame["type"] == "message" and frame.get("role") == "assistant":
            return dict(frame)


def test_what_new_asks_the_model_is_in_the_usage(
    api: httpx.Client, priced: dict[str, str], llm: ScriptedLLM
) -> None:
    llm.reply("Noted: tea, no sugar.", usage=USAGE)
    api.post("/api/tasks", json={"prompt": "I take tea, no sugar", "session": "api:sum"})
    summary = {"history_entry": "The user takes tea.", "memory_update": "Tea, no sugar."}
    llm.tool_call("save_memory", summary, usage=USAGE)
    api.post("/api/tasks", json={"prompt": "/new", "session": "api:sum"})

    assert len(llm.requests) == 2
    [line] = api.get("/api/usage", params={"days": 1}).json()["by_model"]
    assert line["model"] == "openai/scripted"
    assert line["total_tokens"] == 2 * USAGE["total_tokens"]
    assert line["cost"] == pytest.approx(float(2 * CALL))
    assert spent_today(api) == 2 * CALL
    memory = {m["session"]: m["content"] for m in api.get("/api/memory").json()}
    assert memory == {"api:sum": "The user takes tea.", None: "Tea, no sugar."}
    # Nothing is left held once it is done.
    assert (
        query(
            priced,
            "from sessions_app.models import SpendingHold\nresult = SpendingHold.objects.count()",
        )
        == 0
    )


@pytest.fixture
def short_memory(priced: dict[str, str]) -> None:
    priced["AGENT_MEMORY_WINDOW"] = "4"


def test_the_workers_consolidation_past_the_budget_keeps_the_transcript(
    short_memory: None, api: httpx.Client, priced: dict[str, str], llm: ScriptedLLM
) -> None:
    own_budget(priced, "0.70")
    for number in range(3):  # the third's six messages pass the window: it queues one
        llm.reply(f"answer {number}", usage=USAGE)
        done = api.post("/api/tasks", json={"prompt": f"question {number}", "session": "api:long"})
        assert done.json()["status"] == "succeeded", done.text
    with cluster(priced):
        archive = wait_for(
            lambda: [m for m in api.get("/api/memory").json() if m["session"] == "api:long"],
            timeout=60,
            what="the consolidation",
        )
    assert archive[0]["content"].startswith("Archived conversation:")
    assert "USER: question 0" in archive[0]["content"]
    assert len(llm.requests) == 3
