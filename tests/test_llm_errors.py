"""Which kind each failure of a model call is sorted into, on both paths."""

from __future__ import annotations

import pytest

from agent.llm import litellm_adapter, wire
from agent.llm.error_kinds import AUTH_REFUSED, LLMError, classify
from agent.llm.wire import ConnectionFailed, MalformedStream, ProviderError
from tests.conftest import make_llm
from tests.llm_server import ScriptedLLM


async def test_authentication_failure_is_not_retried(llm: ScriptedLLM, backend: str) -> None:
    llm.fault(401, body={"error": {"message": "Incorrect API key provided"}})
    with pytest.raises(LLMError) as caught:
        await make_llm(llm, backend).stream([{"role": "user", "content": "x"}])
    assert caught.value.kind == "auth"
    # The provider's words are for the log; users read a phrase of ours.
    assert str(caught.value) == AUTH_REFUSED
    assert "Incorrect API key" in caught.value.detail
    assert len(llm.requests) == 1


async def test_context_overflow_is_classified(llm: ScriptedLLM, backend: str) -> None:
    llm.fault(
        400,
        body={
            "error": {
                "message": "This model's maximum context length is 8192 tokens.",
                "code": "context_length_exceeded",
            }
        },
    )
    with pytest.raises(LLMError) as caught:
        await make_llm(llm, backend).stream([{"role": "user", "content": "x"}])
    assert caught.value.kind == "context_overflow"
    assert len(llm.requests) == 1


async def test_bad_request_is_classified(llm: ScriptedLLM, backend: str) -> None:
    llm.fault(400, body={"error": {"message": "Invalid value for 'temperature'"}})
    with pytest.raises(LLMError) as caught:
        await make_llm(llm, backend).stream([{"role": "user", "content": "x"}])
    assert caught.value.kind == "bad_request"


def test_classify_plain_exceptions() -> None:
    assert classify(TimeoutError()).kind == "transient"
    assert classify(ConnectionResetError()).kind == "transient"
    assert classify(ValueError("odd")).kind == "unknown"


def test_a_missing_key_is_an_auth_error_not_a_retry() -> None:
    error = classify(ValueError("Missing credentials. Please pass an `api_key`"))
    assert error.kind == "auth"


def test_an_unreadable_retry_after_is_ignored() -> None:
    class Throttled(Exception):
        status_code = 429
        headers = {"retry-after": "soon"}

    error = classify(Throttled("slow down"))
    assert error.kind == "transient" and error.retry_after is None


async def test_litellm_knows_an_overflow_the_lean_words_miss(llm: ScriptedLLM) -> None:
    # llama.cpp's words: litellm maps them to ContextWindowExceededError, and the litellm
    # path goes by that class.
    llm.fault(400, body={"error": {"message": "the request exceeds the available context size"}})
    with pytest.raises(LLMError) as caught:
        await make_llm(llm, "litellm").stream([{"role": "user", "content": "x"}])
    assert caught.value.kind == "context_overflow"
    assert len(llm.requests) == 1


def test_litellm_failures_are_sorted_by_their_class() -> None:
    litellm = litellm_adapter.load()
    from litellm.exceptions import MidStreamFallbackError

    sort = litellm_adapter.classify
    no_words = litellm.ContextWindowExceededError("the prompt has 9000 tokens", "m", "p")
    assert sort(no_words).kind == "context_overflow"
    # The class settles a timeout whatever status it carries.
    assert sort(litellm.Timeout("slow", "m", "p", exception_status_code=400)).kind == "transient"
    assert sort(litellm.APIConnectionError("reset", "p", "m")).kind == "transient"
    assert sort(litellm.NotFoundError("no such model", "m", "p")).kind == "bad_request"
    # A failure in mid-stream keeps the status of what broke: a bad request stays one.
    assert sort(MidStreamFallbackError("cut off", "m", "p")).kind == "transient"
    inner = litellm.BadRequestError("bad tool schema", "m", "p")
    cut = MidStreamFallbackError("cut off", "m", "p", original_exception=inner)
    assert sort(cut).kind == "bad_request"


def test_a_class_named_like_litellms_is_not_taken_for_it() -> None:
    class ContextWindowExceededError(Exception):
        status_code = 400

    assert classify(ContextWindowExceededError("the prompt has 9000 tokens")).kind == "bad_request"
    assert litellm_adapter.classify(ContextWindowExceededError("9000 tokens")).kind == "bad_request"


def test_lean_failures_are_sorted_by_status_and_class() -> None:
    throttled = classify(
        ProviderError("slow down", status_code=429, headers={"retry-after-ms": "1500"})
    )
    assert (throttled.kind, throttled.status, throttled.retry_after) == ("transient", 429, 1.5)
    assert classify(ProviderError("no such model", status_code=404)).kind == "bad_request"
    assert classify(ProviderError("bad key", status_code=401)).kind == "auth"
    assert classify(MalformedStream("cut")).kind == "transient"
    assert classify(ConnectionFailed("refused")).kind == "transient"


def test_a_failed_litellm_import_is_sorted_without_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(litellm_adapter, "_litellm", None)
    assert litellm_adapter.classify(ImportError("no litellm")).kind == "unknown"
    assert litellm_adapter.classify(ConnectionResetError()).kind == "transient"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1"),
        ("https://me:secret@llm.example:8443/v1?key=k#x", "https://llm.example:8443/v1"),
        ("http://[::1]:11434/v1", "http://[::1]:11434/v1"),
        ("http://host:port/v1", "http://host/v1"),
    ],
)
def test_a_server_is_named_without_what_may_be_a_key(url: str, shown: str) -> None:
    assert wire.without_credentials(url) == shown
