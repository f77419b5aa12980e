"""The daily budget at every door (the API's 429 is in test_usage_api.py): the web chat's
socket, the command line with `--user`, a cron run, `spawn` and `subagent`, a turn that
crosses it midway, and staff lifting it for a user in the admin."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from agent.events import StreamChunk
from agent.turn import OverBudget, SessionGone, SessionRef, run_turn
from cron_app import services as cron_services
from cron_app.models import CronJob
from sessions_app.models import DailyUsage, Message, Run, Session, SpendingHold, UserBudget
from sessions_app.services import delete_session
from sessions_app.usage import add_usage, today
from tests.conftest import ROOT, run_manage
from tests.jobs import hold_queue
from tests.llm_server import ScriptedLLM
from tests.ws import open_chat, receive_until

pytestmark = pytest.mark.django_db(transaction=True)

USAGE = {"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500}
PRICES = json.dumps({"openai/scripted": {"input": 0.5, "output": 1.5}})
COST = 1000 * 0.5e-6 + 500 * 1.5e-6  # $0.00125 a call


@pytest.fixture
def budget(agent_settings: Any) -> Any:
    """A dollar a day, and a price for the scripted model."""
    agent_settings.AGENT_MODEL_PRICES = PRICES
    agent_settings.AGENT_USER_DAILY_BUDGET = 1.0
    return agent_settings


def spend(user: User, dollars: str) -> None:
    """What earlier runs of the user cost today, as the ledger has it."""
    add_usage(owner_id=user.pk, model="openai/scripted", usage=USAGE, cost=Decimal(dollars))


def stored(key: str) -> list[dict[str, Any]]:
    rows = Message.objects.filter(session__key=key).order_by("id")
    return [row.as_llm_message() for row in rows]


# -- the web chat ---------------------------------------------------------------------------


async def test_the_socket_shows_each_runs_cost_and_refuses_past_the_budget(
    budget: Any, llm: ScriptedLLM, token: str
) -> None:
    budget.AGENT_USER_DAILY_BUDGET = 0.001  # less than one call
    socket, _ = await open_chat("b1", token)
    llm.reply("That was all for today.", usage=USAGE)
    await socket.send_json_to({"type": "message", "content": "hello"})
    frames = await receive_until(socket, "message", role="assistant")
    [finished] = [frame for frame in frames if frame["type"] == "thinking_finished"]
    used = {**USAGE, "cost": COST, "priced_cost": COST, "unpriced_runs": 0}
    assert finished["usage"] == used
    assert frames[-1]["usage"] == used

    await socket.send_json_to({"type": "message", "content": "and more?"})
    refusal = await socket.receive_json_from(timeout=10)
    assert refusal["type"] == "error" and refusal["refused"] is True
    assert refusal["message"].startswith(
        "Your daily budget of $0.001 is spent ($0.00125 since 00:00 UTC); "
        "it renews at 00:00 UTC, in "
    )
    assert 0 < refusal["retry_after"] <= 86400
    assert len(llm.requests) == 1

    # Commands cost nothing and still answer.
    await socket.send_json_to({"type": "message", "content": "/help"})
    assert "/new" in (await receive_until(socket, "message", role="assistant"))[-1]["content"]

    # After a reload, the reply carries its run's usage in the history.
    await socket.disconnect()
    socket, history = await open_chat("b1", token)
    reply = [m for m in history["messages"] if m["content"] == "That was all for today."]
    assert reply[0]["run_usage"] == used
    await socket.disconnect()


# -- the command line -----------------------------------------------------------------------


def test_the_command_line_refuses_a_user_past_the_budget(
    site_env: dict[str, str], llm: ScriptedLLM
) -> None:
    env = {**site_env, "AGENT_MODEL_PRICES": PRICES, "AGENT_USER_DAILY_BUDGET": "0.001"}
    made = run_manage(
        env,
        "shell",
        "-c",
        "from django.contrib.auth.models import User\n"
        "User.objects.create_user('ada'); User.objects.create_user('bob')",
    )
    assert made.returncode == 0, made.stderr

    def agent(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "manage.py", "agent", *args]
        return subprocess.run(
            command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )

    llm.reply("Spent.", usage=USAGE)
    first = agent("-m", "hello", "--user", "ada")
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "Spent."

    refused = agent("-m", "again", "--user", "ada")
    assert refused.returncode == 2
    [line] = refused.stderr.strip().splitlines()
    assert line.startswith(
        "CommandError: Your daily budget of $0.001 is spent ($0.00125 since 00:00 UTC); "
        "it renews at 00:00 UTC, in "
    )
    assert len(llm.requests) == 1
    # Another user's budget is theirs.
    llm.reply("Bob's turn.", usage=USAGE)
    assert agent("-m", "hello", "--user", "bob").returncode == 0


# -- the user's own work ----------------------------------------------------------------------


async def test_a_cron_run_past_the_budget_is_skipped_with_why(
    budget: Any, llm: ScriptedLLM, ada: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = hold_queue(monkeypatch)
    job = await sync_to_async(cron_services.create_job)(
        owner=ada, message="Any news?", session="web:news", kind="every", every_seconds=3600
    )
    await sync_to_async(spend)(ada, "1.50")
    await sync_to_async(cron_services.run_now)(job=job)
    assert await queue.run_all() == ["limited"]

    assert llm.requests == []
    job = await sync_to_async(CronJob.objects.get)(pk=job.pk)
    why = "ada's daily budget of $1.00 is spent ($1.50 since 00:00 UTC); it renews at 00:00 UTC"
    assert job.last_status == "skipped"
    assert job.last_error.startswith(f"skipped: {why}")
    assert not await sync_to_async(Message.objects.filter(session__key="web:news").exists)()


async def test_spawn_and_subagent_refuse_once_the_budget_is_spent(
    budget: Any, llm: ScriptedLLM, ada: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = hold_queue(monkeypatch)
    budget.AGENT_USER_DAILY_BUDGET = 0.002
    # The first answer asks for a sub-agent it waits for, then one spawned: the first runs
    # (one call, $0.00125) and with the parent's own call spends the budget, so the second
    # is refused, and the turn stops before calling the model again.
    llm.tool_calls(
        [("subagent", {"task": "count the files"}), ("spawn", {"task": "and the folders"})],
        usage=USAGE,
    )
    llm.reply("There are no files.", usage=USAGE)
    result = await run_turn(SessionRef("web:s1", ada), "look around", channel="web")

    results = [m["content"] for m in await sync_to_async(stored)("web:s1") if m["role"] == "tool"]
    assert results[0] == "There are no files."
    assert results[1].startswith(
        "Error: no sub-agent was started: ada's daily budget of $0.002 is spent ($0.0025 since "
        "00:00 UTC, $0.00125 of it held for their turns still running); it renews at 00:00 "
        "UTC, in "
    )
    assert results[1].endswith("; do the task yourself")
    assert queue.jobs == []
    assert await sync_to_async(Run.objects.filter(channel="subagent").count)() == 1
    assert len(llm.requests) == 2  # the parent's first call and the sub-agent's; no more
    assert result.status == "failed" and result.text.startswith("I stopped here")


async def test_a_turn_that_crosses_the_budget_stops_after_its_model_call(
    budget: Any, llm: ScriptedLLM, ada: User
) -> None:
    budget.AGENT_USER_DAILY_BUDGET = 0.002
    llm.tool_call("list_dir", {"path": "."}, usage=USAGE)  # $0.00125: under
    llm.tool_call("list_dir", {"path": "."}, usage=USAGE)  # $0.0025 in all: over
    llm.reply("never asked for", usage=USAGE)
    result = await run_turn(SessionRef("web:m1", ada), "keep looking", channel="web")

    assert len(llm.requests) == 2
    assert result.status == "failed"
    assert result.text == (
        "I stopped here: your daily budget of $0.002 is spent ($0.0025 since 00:00 UTC, "
        "$0.0025 of it held for your turns still running), so I make no more model calls "
        "today; it renews at 00:00 UTC, in " + result.text.split("in ", 3)[-1]
    )
    messages = await sync_to_async(stored)("web:m1")
    # Every call has its result and the turn ends with the assistant's word: a valid history.
    assert [m["role"] for m in messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert messages[-1]["content"] == result.text
    calls = [c["id"] for m in messages if m.get("tool_calls") for c in m["tool_calls"]]
    assert calls == [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    run = await sync_to_async(Run.objects.get)(pk=result.run_id)
    assert (run.status, run.error, run.cost) == ("failed", result.text, Decimal("0.0025"))
    line = await sync_to_async(DailyUsage.objects.get)(owner=ada, day=today())
    assert (line.runs, line.priced_cost) == (1, Decimal("0.0025"))

    # The next turn does not start.
    with pytest.raises(OverBudget, match=r"^Your daily budget of \$0.002 is spent"):
        await run_turn(SessionRef("web:m1", ada), "go on", channel="web")
    assert len(llm.requests) == 2


@pytest.mark.parametrize("when", ["as it calls a tool", "as it answers"])
async def test_a_turn_whose_chat_is_deleted_as_it_runs_still_counts_what_it_cost(
    budget: Any, llm: ScriptedLLM, ada: User, when: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its cost went nowhere: its hold, which counted it, lapsed an hour later, and a user
    who deleted the chat of an expensive turn had their budget back. The turn's write finds
    the chat gone before its watch does, which stops a turn whose run is deleted (the watch
    polls, where no layer tells it at once)."""
    monkeypatch.setattr("agent.turn.runner.watch_run", lambda run_id, task: lambda: None)
    deleted = asyncio.Event()

    async def delete_the_chat() -> None:
        while not llm.requests:
            await asyncio.sleep(0.01)
        session = await sync_to_async(Session.objects.get)(key="web:gone")
        await sync_to_async(delete_session)(session=session)  # as the API's DELETE does
        deleted.set()

    if when == "as it calls a tool":
        # Deleted while the command runs.
        llm.tool_call("exec", {"command": "sleep 1"}, usage=USAGE).reply("Done.", usage=USAGE)
    else:
        # Deleted while the model takes its time to answer.
        llm.reply("Here it is.", usage=USAGE, delay=1.0)
    deleting = asyncio.create_task(delete_the_chat())

    # Whether the door hears of it (SessionGone) depends on which write found the chat gone.
    with contextlib.suppress(SessionGone):
        await run_turn(SessionRef("web:gone", ada), "go", channel="web")

    await deleting
    assert deleted.is_set()
    line = await sync_to_async(DailyUsage.objects.get)(owner=ada, day=today())
    assert (line.runs, line.priced_cost) == (1, Decimal(str(COST)) * len(llm.requests))
    assert not await sync_to_async(SpendingHold.objects.exists)()


async def test_a_reply_stopped_before_its_end_counts_what_it_sent_and_wrote(
    budget: Any, llm: ScriptedLLM, ada: User
) -> None:
    """A stopped call brought no usage and counted nothing: a person who stopped each reply
    just short of its end read it for free, past any budget."""
    llm.reply("word " * 400, chunks=40, chunk_delay=0.05)
    shown: list[str] = []

    async def screen(event: Any) -> None:
        if isinstance(event, StreamChunk):
            shown.append(event.content)

    turn = asyncio.create_task(
        run_turn(SessionRef("web:cut", ada), "tell me everything", channel="web", emit=screen)
    )
    while len(shown) < 5:
        await asyncio.sleep(0.01)
    turn.cancel()
    with pytest.raises(asyncio.CancelledError):
        await turn

    line = await sync_to_async(DailyUsage.objects.get)(owner=ada, day=today())
    assert line.prompt_tokens > 100  # the system prompt and the tools, at the least
    assert 50 <= line.completion_tokens < 400  # what it wrote, not what it would have
    price = 0.5e-6 * line.prompt_tokens + 1.5e-6 * line.completion_tokens
    assert line.priced_cost == pytest.approx(Decimal(str(price)), abs=Decimal("0.000001"))
    assert not await sync_to_async(SpendingHold.objects.exists)()


# -- staff lift it ------------------------------------------------------------------------------


def user_form(user: User, **budget: str) -> dict[str, str]:
    """The admin's change form of `user`, as a browser posts it, with the daily budget."""
    return {
        "username": user.username,
        "first_name": "",
        "last_name": "",
        "email": "",
        "is_active": "on",
        "last_login_0": "",
        "last_login_1": "",
        "date_joined_0": user.date_joined.strftime("%Y-%m-%d"),
        "date_joined_1": user.date_joined.strftime("%H:%M:%S"),
        "agent_budget-TOTAL_FORMS": "1",
        "agent_budget-INITIAL_FORMS": "0",
        "agent_budget-MIN_NUM_FORMS": "0",
        "agent_budget-MAX_NUM_FORMS": "1",
        "agent_budget-0-id": "",
        "agent_budget-0-user": str(user.pk),
        **{f"agent_budget-0-{name}": value for name, value in budget.items()},
    }


def test_staff_lift_the_budget_of_one_user_in_the_admin(
    budget: Any, llm: ScriptedLLM, ada: User, admin_client: Client
) -> None:
    from asgiref.sync import async_to_sync

    spend(ada, "1.50")
    bob = User.objects.create_user("bob")
    spend(bob, "1.50")
    with pytest.raises(OverBudget):
        async_to_sync(run_turn)(SessionRef("web:l1", ada), "hello", channel="web")

    page = admin_client.get(reverse("admin:auth_user_change", args=[ada.pk]))
    assert page.status_code == 200 and "Daily budget" in page.content.decode()
    answer = admin_client.post(
        reverse("admin:auth_user_change", args=[ada.pk]), user_form(ada, unlimited="on")
    )
    assert answer.status_code == 302, answer.content.decode()[-3000:]
    assert UserBudget.objects.get(user=ada).unlimited

    llm.reply("Lifted.", usage=USAGE)
    result = async_to_sync(run_turn)(SessionRef("web:l1", ada), "hello", channel="web")
    assert result.success and result.text == "Lifted."
    # For ada alone.
    with pytest.raises(OverBudget):
        async_to_sync(run_turn)(SessionRef("web:l1", bob), "hello", channel="web")


def test_staff_give_a_user_a_budget_of_their_own(
    agent_settings: Any, llm: ScriptedLLM, ada: User, admin_client: Client
) -> None:
    from asgiref.sync import async_to_sync

    # No site budget: a user's own still holds, and a negative one is refused.
    spend(ada, "0.30")
    url = reverse("admin:auth_user_change", args=[ada.pk])
    answer = admin_client.post(url, user_form(ada, daily_budget="-1"))
    assert answer.status_code == 200 and not UserBudget.objects.exists()
    answer = admin_client.post(url, user_form(ada, daily_budget="0.25"))
    assert answer.status_code == 302
    with pytest.raises(OverBudget, match=r"^Your daily budget of \$0.25 is spent \(\$0.30 "):
        async_to_sync(run_turn)(SessionRef("web:o1", ada), "hello", channel="web")
    assert llm.requests == []
