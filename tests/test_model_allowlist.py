"""The operator's model allow-list (AGENT_MODEL and AGENT_MODELS) in the turn service, in
`/model`, for queued tasks and cron runs; over real HTTP, a socket and the command line in
`test_model_allowlist_live.py`, and provider errors in `test_model_allowlist_errors.py`."""

from __future__ import annotations

import logging

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agent.job_functions import run_queued_task
from agent.turn import InvalidInput, run_cron_job, run_turn
from cron_app import services as cron_services
from sessions_app.models import Run, Session
from tests.llm_server import ScriptedLLM

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]


@pytest.mark.parametrize("model", ["ollama/llama3", "7", "openai/other"])
async def test_a_model_off_the_list_is_refused_before_anything_happens(
    llm: ScriptedLLM, model: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        await run_turn("api:m", "hi", channel="api", model=model)

    assert caught.value.field == "model"
    assert str(caught.value) == (
        f"the model {model} is not available here; choose one of: openai/scripted"
    )
    assert llm.requests == []
    assert not await Session.objects.aexists() and not await Run.objects.aexists()


async def test_a_model_on_the_list_is_used(llm: ScriptedLLM, settings) -> None:
    settings.AGENT_MODELS = ["openai/second", " openai/third "]
    llm.reply("ok")
    result = await run_turn("api:m", "hi", channel="api", model="openai/third")
    assert result.success and llm.requests[0]["model"] == "third"


async def test_slash_model_refuses_an_id_off_the_list_and_lists_the_choices(
    llm: ScriptedLLM, settings
) -> None:
    settings.AGENT_MODELS = ["openai/second"]
    with pytest.raises(InvalidInput) as caught:
        await run_turn("web:s", "/model ollama/llama3", channel="web")
    assert "openai/scripted, openai/second" in str(caught.value)
    assert (await Session.objects.aget(key="web:s")).model == ""

    shown = await run_turn("web:s", "/model", channel="web")
    assert shown.text == "Model: openai/scripted\nAvailable: openai/scripted, openai/second"
    switched = await run_turn("web:s", "/model openai/second", channel="web")
    assert switched.text == "This session now uses openai/second."
    assert llm.requests == []


async def test_a_session_whose_model_was_taken_off_the_list_falls_back(
    llm: ScriptedLLM, settings, caplog: pytest.LogCaptureFixture
) -> None:
    settings.AGENT_MODELS = ["openai/second"]
    await run_turn("web:s", "/model openai/second", channel="web")
    llm.reply("from second").reply("from the default")
    await run_turn("web:s", "one", channel="web")

    settings.AGENT_MODELS = []  # the operator shrank the list
    with caplog.at_level(logging.WARNING, logger="agent.turn.refusals"):
        result = await run_turn("web:s", "two", channel="web")

    assert [r["model"] for r in llm.requests] == ["second", "scripted"]
    assert result.text == "from the default"
    assert "web:s uses openai/second, which AGENT_MODELS no longer allows" in caplog.text
    run = await Run.objects.order_by("-created").afirst()
    assert run is not None and run.model == "openai/scripted"
    # The choice is kept, should the operator allow it again.
    assert (await Session.objects.aget(key="web:s")).model == "openai/second"
    assert (await run_turn("web:s", "/model", channel="web")).text == "Model: openai/scripted"


def test_a_queued_task_whose_model_was_taken_off_the_list_fails_plainly(
    api: APIClient, llm: ScriptedLLM, settings
) -> None:
    settings.AGENT_MODELS = ["openai/second"]
    body = {"prompt": "hi", "model": "openai/second", "wait": False}
    queued = api.post("/api/tasks", body, format="json")
    assert queued.status_code == 202, queued.content

    settings.AGENT_MODELS = []
    run_queued_task(queued.json()["id"])

    task = api.get(f"/api/tasks/{queued.json()['id']}").json()
    assert task["status"] == "failed"
    assert task["error"] == (
        "the model openai/second is not available here; choose one of: openai/scripted"
    )
    assert llm.requests == []


async def test_a_cron_run_of_a_session_whose_model_was_taken_off_falls_back(
    llm: ScriptedLLM, ada: User, settings
) -> None:
    job = await sync_to_async(cron_services.create_job)(
        owner=ada, message="report", session="web:a1", kind="every", every_seconds=600
    )
    # Picked with /model while the operator allowed it.
    await Session.objects.acreate(
        key=f"cron:{job.pk}", channel="cron", chat_id=str(job.pk), owner=ada, model="openai/gone"
    )
    llm.reply("done")

    assert await run_cron_job(job.pk, scheduled=False) == "succeeded"
    assert [r["model"] for r in llm.requests] == ["scripted"]


def test_the_api_lists_the_models_one_may_pick(api: APIClient, settings) -> None:
    settings.AGENT_MODELS = ["openai/second", "openai/scripted"]
    assert api.get("/api/models").json() == {
        "default": "openai/scripted",
        "models": ["openai/scripted", "openai/second"],
    }
    assert APIClient().get("/api/models").status_code == 401


@pytest.mark.parametrize("wait", [True, False])
@pytest.mark.parametrize("model", ["ollama/llama3", "7"])
def test_by_default_the_api_allows_agent_model_alone(
    api: APIClient, llm: ScriptedLLM, model: str, wait: bool
) -> None:
    body = {"prompt": "hi", "model": model, "wait": wait}
    response = api.post("/api/tasks", body, format="json")

    assert response.status_code == 400
    assert response.json() == {
        "model": [f"the model {model} is not available here; choose one of: openai/scripted"]
    }
    assert llm.requests == [] and not Run.objects.exists() and not Session.objects.exists()
