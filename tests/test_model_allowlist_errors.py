"""A provider's or litellm's raw error text never reaches a user: every failure is a phrase of
ours for its kind (ids it does not know, failed connections, dumps, a provider's own words),
and the detail goes to the log."""

from __future__ import annotations

import logging

import pytest
from rest_framework.test import APIClient

from agent.llm import litellm_adapter
from agent.llm.error_kinds import (
    AUTH_REFUSED,
    CONNECTION_FAILED,
    CONTEXT_OVERFLOW,
    REQUEST_REJECTED,
    TIMED_OUT,
    UNKNOWN_MODEL,
    LLMError,
    classify,
)
from agent.turn.service import run_turn
from sessions_app.models import Run
from tests.conftest import make_llm
from tests.llm_server import ScriptedLLM

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]

LITELLM_WORDS = "LLM Provider NOT provided"


@pytest.fixture
def caplog_warnings(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.WARNING, logger="agent.llm")
    return caplog


async def test_an_id_litellm_cannot_route_is_put_plainly(
    llm: ScriptedLLM, settings, caplog_warnings: pytest.LogCaptureFixture
) -> None:
    # The operator allowed an id that names no provider.
    settings.AGENT_MODELS = ["7"]
    result = await run_turn("api:m", "hi", channel="api", model="7")

    assert not result.success
    assert result.text == (
        "The model id is not one the provider recognises. Try another model, or ask the "
        "site's operator: the server's log has the details."
    )
    run = await Run.objects.aget()
    assert run.error == UNKNOWN_MODEL and run.text == result.text
    assert LITELLM_WORDS in caplog_warnings.text and "model=7" in caplog_warnings.text
    assert llm.requests == []


def test_the_api_shows_no_litellm_words(
    api: APIClient, llm: ScriptedLLM, settings, caplog_warnings: pytest.LogCaptureFixture
) -> None:
    settings.AGENT_MODELS = ["7"]
    response = api.post("/api/tasks", {"prompt": "hi", "model": "7"}, format="json")

    assert response.status_code == 200
    task = response.json()
    assert task["status"] == "failed" and task["error"] == UNKNOWN_MODEL
    assert "litellm" not in response.content.decode().lower()
    assert LITELLM_WORDS not in response.content.decode()
    assert LITELLM_WORDS in caplog_warnings.text


async def test_a_model_the_server_does_not_know_is_put_plainly(
    llm: ScriptedLLM, backend: str, caplog_warnings: pytest.LogCaptureFixture
) -> None:
    words = "The model `nope` does not exist or you do not have access to it."
    llm.fault(404, body={"error": {"message": words, "code": "model_not_found"}})
    with pytest.raises(LLMError) as caught:
        await make_llm(llm, backend).stream([{"role": "user", "content": "x"}])

    assert str(caught.value) == UNKNOWN_MODEL and caught.value.kind == "bad_request"
    assert words in caught.value.detail and words in caplog_warnings.text


async def test_an_html_error_page_is_not_shown(llm: ScriptedLLM, backend: str) -> None:
    page = b"<html><body><h1>502 Bad Gateway</h1><p>upstream 10.0.0.7:8000</p></body></html>"
    llm.fault(502, raw=page)
    with pytest.raises(LLMError) as caught:
        await make_llm(llm, backend, max_retries=0).stream([{"role": "user", "content": "x"}])

    assert str(caught.value) == "the model server failed (HTTP 502)"
    assert "10.0.0.7" in caught.value.detail


async def test_a_failed_connection_names_no_host(llm: ScriptedLLM, settings) -> None:
    settings.AGENT_API_BASE = "http://127.0.0.1:9/v1"
    settings.AGENT_LLM_MAX_RETRIES = 0
    result = await run_turn("api:m", "hi", channel="api")

    assert result.text == "The connection to the model server failed. Try again in a moment."
    assert "127.0.0.1" not in (await Run.objects.aget()).error


def test_litellm_dumps_are_put_plainly() -> None:
    litellm = litellm_adapter.load()
    unrouted = litellm.BadRequestError(
        f"{LITELLM_WORDS}. Pass in the LLM provider you are trying to call. You passed "
        "model=7\n Pass model as E.g. For 'Huggingface' inference endpoints pass in "
        "`completion(model='huggingface/starcoder',..)` Learn more: "
        "https://docs.litellm.ai/docs/providers",
        "7",
        "",
    )
    sorted_ = litellm_adapter.classify(unrouted)
    assert (str(sorted_), sorted_.kind) == (UNKNOWN_MODEL, "bad_request")
    assert LITELLM_WORDS in sorted_.detail

    refused = litellm.APIConnectionError(
        "OllamaException - Cannot connect to host 127.0.0.1:11434 "
        "ssl:<ssl.SSLContext object at 0x7f0b5dfcf530> [Connect call failed]",
        "ollama",
        "ollama/llama3",
    )
    assert str(litellm_adapter.classify(refused)) == CONNECTION_FAILED
    timed_out = litellm.Timeout("Request timed out after 5s", "m", "p")
    assert str(litellm_adapter.classify(timed_out)) == TIMED_OUT

    dump = litellm.InternalServerError("Traceback (most recent call last):\n  File …", "p", "m")
    assert str(litellm_adapter.classify(dump)) == "the model server failed (HTTP 500)"


@pytest.mark.parametrize(
    ("status", "words", "shown"),
    [
        (400, "Invalid value for 'temperature'", f"{REQUEST_REJECTED} (HTTP 400)"),
        (
            400,
            "postgres://admin:hunter2@10.1.2.3:5432/prod is down",
            f"{REQUEST_REJECTED} (HTTP 400)",
        ),
        (400, "maximum context length is 8192 tokens (db at 10.1.2.3)", CONTEXT_OVERFLOW),
        (401, "key sk-live-123 was revoked by admin@corp.example", AUTH_REFUSED),
        (404, "no route to 10.1.2.3", f"{REQUEST_REJECTED} (HTTP 404)"),
        (429, "quota of org-7 exceeded", "the model provider is limiting requests (HTTP 429)"),
        (503, "redis://:hunter2@cache:6379 unreachable", "the model server failed (HTTP 503)"),
    ],
)
def test_a_providers_own_words_are_never_shown(
    status: int, words: str, shown: str, caplog_warnings: pytest.LogCaptureFixture
) -> None:
    class Refused(Exception):
        status_code = status

    error = classify(Refused(words))
    assert str(error) == shown
    assert error.detail == words and words in caplog_warnings.text


def test_failures_without_a_status_are_put_plainly() -> None:
    assert str(classify(ConnectionResetError("reset by 10.1.2.3"))) == CONNECTION_FAILED
    assert str(classify(TimeoutError())) == TIMED_OUT
    assert str(classify(ValueError("mysql://root:pw@db/x"))) == "the model call failed"
