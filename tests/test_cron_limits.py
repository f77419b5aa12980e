"""What one user's background work may take: at most `AGENT_CRON_MAX_JOBS` cron jobs, made
through any door (the API over real HTTP, the agent's `cron` tool, the admin), and cron runs
and sub-agents counted against the same turn rate as the chat and the API
(`AGENT_TURN_RATE`). Many due jobs in a real cluster are in `test_cron_limits_live.py`."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse

from agent.events import Collector
from agent.turn import SessionRef, run_turn, take_turn_slot
from cron_app import services
from cron_app.models import CronJob
from sessions_app.models import Message, Run
from tests.conftest import LOGIN, login_token
from tests.jobs import hold_queue
from tests.llm_server import ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)

EVERY = {"message": "Any news?", "session": "web:news", "kind": "every", "every_seconds": 3600}
CAP = "one user may have at most 2 (AGENT_CRON_MAX_JOBS)"


@pytest.fixture
def ada(db: None) -> User:
    return User.objects.create_user("ada", password="pw")


@pytest.fixture
def two_jobs_each(settings: Any) -> None:
    settings.AGENT_CRON_MAX_JOBS = 2


def fill(owner: User, count: int = 2) -> list[CronJob]:
    return [services.create_job(owner=owner, **EVERY) for _ in range(count)]


def tool_results(key: str) -> list[str]:
    return list(
        Message.objects.filter(session__key=key, role="tool").values_list("content", flat=True)
    )


# -- the cap on jobs --------------------------------------------------------------------


def test_the_services_refuse_a_job_past_the_cap(two_jobs_each: None, ada: User) -> None:
    fill(ada)
    with pytest.raises(ValidationError) as refused:
        services.create_job(owner=ada, **EVERY)
    assert refused.value.messages == [
        f"ada has 2 cron jobs, and {CAP}: remove one before adding another"
    ]
    # Another user's jobs are theirs to count.
    services.create_job(owner=User.objects.create_user("bob"), **EVERY)
    assert CronJob.objects.filter(owner=ada).count() == 2


def test_a_cap_lowered_below_what_a_user_has_says_how_many_to_remove(
    settings: Any, ada: User
) -> None:
    fill(ada, 4)
    settings.AGENT_CRON_MAX_JOBS = 2
    with pytest.raises(ValidationError) as refused:
        services.create_job(owner=ada, **EVERY)
    assert refused.value.messages == [
        f"ada has 4 cron jobs, and {CAP}: remove 3 before adding another"
    ]
    settings.AGENT_CRON_MAX_JOBS = 0
    with pytest.raises(ValidationError, match=r"cron jobs are turned off .*AGENT_CRON_MAX_JOBS"):
        services.create_job(owner=ada, **EVERY)


@pytest.mark.usefixtures("agent_settings", "two_jobs_each")
async def test_the_cron_tool_says_the_cap_as_an_error(llm: ScriptedLLM, ada: User) -> None:
    await sync_to_async(fill)(ada)
    llm.tool_call("cron", {"action": "add", "message": "Stretch", "every_seconds": 3600})
    llm.reply("You have too many jobs.")
    await run_turn(SessionRef("web:a1", ada), "remind me to stretch", channel="web")
    [result] = await sync_to_async(tool_results)("web:a1")
    assert result == f"Error: ada has 2 cron jobs, and {CAP}: remove one before adding another"
    assert await sync_to_async(CronJob.objects.filter(owner=ada).count)() == 2


def admin_form(owner: User, **fields: Any) -> dict[str, Any]:
    return {
        "owner": str(owner.pk),
        "name": "Morning news",
        "message": "Any news?",
        "session": "web:news",
        "enabled": "on",
        "kind": "every",
        "every_seconds": "600",
        "cron_expr": "",
        "tz": "UTC",
        "at_0": "",
        "at_1": "",
        **fields,
    }


def test_the_admin_form_says_the_cap(two_jobs_each: None, admin_client: Client, ada: User) -> None:
    fill(ada)
    answer = admin_client.post(reverse("admin:cron_app_cronjob_add"), admin_form(ada))
    assert answer.status_code == 200  # the form again, with why
    assert f"ada has 2 cron jobs, and {CAP}" in answer.content.decode()
    assert CronJob.objects.filter(owner=ada).count() == 2

    # Nor may another's job be handed to a user at the cap; a change that keeps the owner may.
    bob = User.objects.create_user("bob")
    [bobs] = fill(bob, 1)
    change = reverse("admin:cron_app_cronjob_change", args=[bobs.pk])
    answer = admin_client.post(change, admin_form(ada))
    assert answer.status_code == 200 and CAP in answer.content.decode()
    answer = admin_client.post(change, admin_form(bob, name="Renamed"))
    assert answer.status_code == 302
    assert CronJob.objects.get(pk=bobs.pk).owner_id == bob.pk


@pytest.fixture
def capped_site(site_env: dict[str, str]) -> None:
    site_env["AGENT_CRON_MAX_JOBS"] = "2"


def test_the_api_answers_400_past_the_cap_even_for_creates_at_once(
    capped_site: None, live_site: str, site_env: dict[str, str]
) -> None:
    token = login_token(site_env)
    headers = {"Authorization": f"Token {token}"}
    with httpx.Client(base_url=live_site, headers=headers, timeout=30) as api:
        made = [api.post("/api/cron-jobs", json=EVERY) for _ in range(2)]
        assert [answer.status_code for answer in made] == [201, 201]
        refused = api.post("/api/cron-jobs", json=EVERY)
        assert refused.status_code == 400, refused.text
        assert refused.json() == {
            "non_field_errors": [
                f"{LOGIN[0]} has 2 cron jobs, and {CAP}: remove one before adding another"
            ]
        }
        # A place freed, six clients ask for it at once: one gets it.
        assert api.delete(f"/api/cron-jobs/{made[0].json()['id']}").status_code == 204
        with ThreadPoolExecutor(6) as pool:
            burst = list(pool.map(lambda _: api.post("/api/cron-jobs", json=EVERY), range(6)))
        assert sorted(answer.status_code for answer in burst) == [201] + [400] * 5
        assert len(api.get("/api/cron-jobs").json()) == 2


# -- cron runs and sub-agents against the turn rate ---------------------------------------


def use_up_the_rate(user: User) -> None:
    """Start turns as the chat and the API would until the user's rate is spent."""
    while take_turn_slot(user.pk) is None:
        pass


@pytest.mark.usefixtures("agent_settings")
async def test_a_cron_run_past_the_rate_is_skipped_with_why_and_not_delivered(
    llm: ScriptedLLM, ada: User, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    settings.AGENT_TURN_RATE = "3/min"
    queue = hold_queue(monkeypatch)
    job = await sync_to_async(services.create_job)(owner=ada, **EVERY)
    await sync_to_async(use_up_the_rate)(ada)
    await sync_to_async(services.run_now)(job=job)
    assert await queue.run_all() == ["limited"]

    assert llm.requests == []
    job = await sync_to_async(CronJob.objects.get)(pk=job.pk)
    assert job.last_status == "skipped"
    assert job.last_error == "skipped: ada is past their turn rate of 3/min"
    assert not await sync_to_async(Message.objects.filter(session__key="web:news").exists)()
    run = await sync_to_async(Run.objects.get)(session__key=f"cron:{job.pk}")
    assert (run.status, run.error) == ("failed", "ada is past their turn rate of 3/min")


@pytest.mark.usefixtures("agent_settings")
async def test_spawn_past_the_rate_is_an_error_and_an_announcement_past_it_calls_no_model(
    llm: ScriptedLLM, ada: User, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    settings.AGENT_TURN_RATE = "2/min"
    queue = hold_queue(monkeypatch)
    for n in range(3):
        llm.tool_call("spawn", {"task": f"task {n}", "label": f"helper {n}"})
    llm.reply("Two helpers are on it.")
    await run_turn(SessionRef("web:a1", ada), "split the work", channel="web")

    *started, refused = await sync_to_async(tool_results)("web:a1")
    assert all(result.startswith("Sub-agent 'helper") for result in started)
    assert refused.startswith(
        "Error: no sub-agent was started: ada is past their turn rate of 2/min; try again in "
    )
    assert await sync_to_async(Run.objects.filter(channel="subagent").count)() == 2

    # The two run (the spawns counted them); their announcements find the rate spent and
    # post each answer as it is rather than ask the model to tell it.
    llm.reply("first answer").reply("second answer")
    before = len(llm.requests)
    assert await queue.run_all() == ["succeeded", "succeeded"]
    assert len(llm.requests) == before + 2
    told = await sync_to_async(list)(
        Message.objects.filter(session__key="web:a1", role="assistant")
        .order_by("id")
        .values_list("content", flat=True)
    )
    assert told[-2:] == [
        f"The sub-agent 'helper {n}' finished. Its answer, as it gave it (ada is past their "
        f"turn rate of 2/min):\n\n{answer}"
        for n, answer in enumerate(["first answer", "second answer"])
    ]


@pytest.mark.usefixtures("agent_settings")
async def test_the_subagent_tool_past_the_rate_is_an_error(
    llm: ScriptedLLM, ada: User, settings: Any
) -> None:
    settings.AGENT_TURN_RATE = "1/min"
    await sync_to_async(use_up_the_rate)(ada)
    llm.tool_call("subagent", {"task": "List the workspace"}).reply("I'll do it myself.")
    events = Collector()
    await run_turn(SessionRef("web:a1", ada), "look around", channel="web", emit=events)
    result = events.of_type("tool_result")[0].to_dict()["result"]
    assert result.startswith("Error: no sub-agent was started: ada is past their turn rate")
    assert len(llm.requests) == 2  # the parent's two calls; no sub-agent's
    assert not await sync_to_async(Run.objects.filter(channel="subagent").exists)()
