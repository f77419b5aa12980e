"""The LLM adapter against the scripted server, over real HTTP.

Every test that calls the model runs twice: on the lean path that speaks OpenAI's protocol
itself, and through litellm (forced by the backend setting), so both behave alike.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from agent.llm import LLM, LLMConfig, ToolCallAssembler
from agent.llm_errors import LLMError, classify
from tests.llm_server import ScriptedLLM

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(params=["auto", "litellm"], ids=["lean", "litellm"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def make_llm(server: ScriptedLLM, backend: str = "auto", **overrides: object) -> LLM:
    options: dict[str, object] = {
        "backend": backend,
        "model": "openai/scripted",
        "api_base": server.base_url,
        "api_key": "test-key",
        "timeout": 5.0,
        "max_retries": 3,
        "retry_budget": 10.0,
    }
    options.update(overrides)
    return LLM(LLMConfig(**options))  # type: ignore[arg-type]


async def test_streams_text_and_collects_usage(llm: ScriptedLLM, backend: str) -> None:
    llm.reply("Hello there, streaming world", chunks=5, reasoning="let me think")
    pieces: list[str] = []
    thoughts: list[str] = []

    async def on_text(piece: str) -> None:
        pieces.append(piece)

    async def on_reasoning(piece: str) -> None:
        thoughts.append(piece)

    response = await make_llm(llm, backend).stream(
        [{"role": "user", "content": "hi"}], on_text=on_text, on_reasoning=on_reasoning
    )

    assert response.content == "Hello there, streaming world"
    assert len(pieces) >= 5
    assert "".join(pieces) == response.content
    assert "".join(thoughts) == response.reasoning_content == "let me think"
    assert response.usage["total_tokens"] == (
        response.usage["prompt_tokens"] + response.usage["completion_tokens"]
    )
    assert response.usage["total_tokens"] > 0
    assert llm.requests[0]["stream"] is True
    assert llm.requests[0]["stream_options"] == {"include_usage": True}


async def test_assembles_tool_calls_split_over_chunks(llm: ScriptedLLM, backend: str) -> None:
    llm.tool_calls(
        [
            ("write_file", {"path": "notes/a.txt", "content": "x" * 50}),
            ("read_file", {"path": "notes/a.txt", "offset": 2}),
        ],
        text="Writing it now.",
    )
    tools = [
        {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
        for n in ("write_file", "read_file")
    ]
    response = await make_llm(llm, backend).stream([{"role": "user", "content": "go"}], tools)

    assert response.content == "Writing it now."
    assert [call.name for call in response.tool_calls] == ["write_file", "read_file"]
    assert (
        response.tool_calls[0].arguments == '{"path": "notes/a.txt", "content": "' + "x" * 50 + '"}'
    )
    assert response.tool_calls[1].arguments == '{"path": "notes/a.txt", "offset": 2}'
    assert all(call.id.startswith("call_") for call in response.tool_calls)
    assert llm.requests[0]["tools"] == tools


def fragment(index: int | None, call_id: str | None, name: str | None, args: str) -> object:
    return SimpleNamespace(
        index=index, id=call_id, function=SimpleNamespace(name=name, arguments=args)
    )


def test_assembler_tolerates_missing_index() -> None:
    assembler = ToolCallAssembler()
    assembler.add(fragment(None, "a", "read_file", '{"pa'))
    assembler.add(fragment(None, None, None, 'th": "x"}'))
    assembler.add(fragment(None, "b", "list_dir", "{}"))
    calls = assembler.calls()
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("a", "read_file", '{"path": "x"}'),
        ("b", "list_dir", "{}"),
    ]


def test_assembler_tolerates_repeated_index_with_new_ids() -> None:
    assembler = ToolCallAssembler()
    assembler.add(fragment(0, "a", "read_file", '{"path": "1"}'))
    assembler.add(fragment(0, "b", "read_file", '{"path": "2"}'))
    assembler.add(fragment(0, None, None, ""))
    calls = assembler.calls()
    assert [(c.id, c.arguments) for c in calls] == [("a", '{"path": "1"}'), ("b", '{"path": "2"}')]


def test_assembler_gives_ids_to_calls_without_one() -> None:
    assembler = ToolCallAssembler()
    assembler.add({"index": 0, "function": {"name": "glob", "arguments": '{"pattern": "*"}'}})
    (call,) = assembler.calls()
    assert call.id and call.name == "glob"


async def test_retries_server_errors_then_succeeds(llm: ScriptedLLM, backend: str) -> None:
    llm.fault(500).fault(503).reply("recovered")
    retries: list[tuple[int, str]] = []

    async def on_retry(attempt: int, delay: float, error: LLMError) -> None:
        retries.append((attempt, error.kind))

    response = await make_llm(llm, backend).stream(
        [{"role": "user", "content": "x"}], on_retry=on_retry
    )
    assert response.content == "recovered"
    assert retries == [(1, "transient"), (2, "transient")]
    assert len(llm.requests) == 3


async def test_honours_retry_after_on_429(llm: ScriptedLLM, backend: str) -> None:
    llm.fault(429, retry_after="1.2").reply("ok")
    delays: list[float] = []

    async def on_retry(attempt: int, delay: float, error: LLMError) -> None:
        delays.append(delay)

    started = time.monotonic()
    response = await make_llm(llm, backend).stream(
        [{"role": "user", "content": "x"}], on_retry=on_retry
    )
    assert response.content == "ok"
    assert delays == [1.2]
    assert time.monotonic() - started >= 1.2


async def test_gives_up_after_max_retries(llm: ScriptedLLM, backend: str) -> None:
    for _ in range(3):
        llm.fault(502)
    with pytest.raises(LLMError) as caught:
        await make_llm(llm, backend, max_retries=2).stream([{"role": "user", "content": "x"}])
    assert caught.value.kind == "transient"
    assert caught.value.status == 502
    assert len(llm.requests) == 3


async def test_retry_budget_bounds_the_total_wait(llm: ScriptedLLM, backend: str) -> None:
    llm.fault(429, retry_after="30").reply("never reached")
    started = time.monotonic()
    with pytest.raises(LLMError) as caught:
        await make_llm(llm, backend, retry_budget=5.0).stream([{"role": "user", "content": "x"}])
    assert caught.value.kind == "transient"
    assert time.monotonic() - started < 3
    assert len(llm.requests) == 1


async def test_hanging_response_times_out_and_is_retried(llm: ScriptedLLM, backend: str) -> None:
    llm.hang(5).reply("after the hang")
    started = time.monotonic()
    response = await make_llm(llm, backend, timeout=0.5).stream([{"role": "user", "content": "x"}])
    assert response.content == "after the hang"
    assert time.monotonic() - started < 4.5


async def test_dropped_connection_is_retried_and_reported(llm: ScriptedLLM, backend: str) -> None:
    llm.drop("partial answ").reply("full answer")
    seen: list[str] = []
    retried: list[int] = []

    async def on_text(piece: str) -> None:
        seen.append(piece)

    async def on_retry(attempt: int, delay: float, error: LLMError) -> None:
        retried.append(attempt)
        seen.clear()

    response = await make_llm(llm, backend).stream(
        [{"role": "user", "content": "x"}], on_text=on_text, on_retry=on_retry
    )
    assert retried == [1]
    assert response.content == "full answer"
    assert "".join(seen) == "full answer"


async def test_authentication_failure_is_not_retried(llm: ScriptedLLM, backend: str) -> None:
    llm.fault(401, body={"error": {"message": "Incorrect API key provided"}})
    with pytest.raises(LLMError) as caught:
        await make_llm(llm, backend).stream([{"role": "user", "content": "x"}])
    assert caught.value.kind == "auth"
    assert "Incorrect API key" in str(caught.value)
    assert "litellm" not in str(caught.value)
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


async def test_context_window_is_discovered_from_the_server(llm: ScriptedLLM, backend: str) -> None:
    llm.context_window = 12345
    assert await make_llm(llm, backend, model="openai/scripted").context_window() == 12345


async def test_context_window_override_wins(llm: ScriptedLLM, backend: str) -> None:
    assert await make_llm(llm, backend, context_window=4096).context_window() == 4096


async def test_context_window_of_a_known_model_comes_from_the_model_table(
    llm: ScriptedLLM, backend: str
) -> None:
    window = await make_llm(llm, backend, model="openai/gpt-4o-mini", api_base="").context_window()
    assert window >= 100_000


async def test_a_local_server_needs_no_key(llm: ScriptedLLM, backend: str) -> None:
    llm.reply("no key needed")
    response = await make_llm(llm, backend, api_key="").stream([{"role": "user", "content": "x"}])
    assert response.content == "no key needed"


def test_a_missing_key_is_an_auth_error_not_a_retry() -> None:
    error = classify(ValueError("Missing credentials. Please pass an `api_key`"))
    assert error.kind == "auth"


def test_an_unreadable_retry_after_is_ignored() -> None:
    class Throttled(Exception):
        status_code = 429
        headers = {"retry-after": "soon"}

    error = classify(Throttled("slow down"))
    assert error.kind == "transient" and error.retry_after is None


async def test_reasoning_under_either_name_is_kept(llm: ScriptedLLM, backend: str) -> None:
    llm.reply("answer", reasoning="first I think", reasoning_key="reasoning")
    response = await make_llm(llm, backend).stream([{"role": "user", "content": "x"}])
    assert response.reasoning_content == "first I think"
    assert response.content == "answer"


async def test_reasoning_is_replayed_to_the_model(llm: ScriptedLLM, backend: str) -> None:
    llm.reply("second answer")
    history = [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "first answer", "reasoning_content": "I pondered"},
        {"role": "user", "content": "two"},
    ]
    await make_llm(llm, backend).stream(history)
    assert llm.requests[0]["messages"][1]["reasoning_content"] == "I pondered"


async def test_an_error_event_mid_stream_is_retried(llm: ScriptedLLM, backend: str) -> None:
    llm.stream_error("upstream overloaded", code=503).reply("recovered")
    retried: list[LLMError] = []

    async def on_retry(attempt: int, delay: float, error: LLMError) -> None:
        retried.append(error)

    response = await make_llm(llm, backend).stream(
        [{"role": "user", "content": "x"}], on_retry=on_retry
    )
    assert response.content == "recovered"
    assert len(retried) == 1 and "upstream overloaded" in str(retried[0])


async def test_a_stream_of_garbage_is_retried(llm: ScriptedLLM, backend: str) -> None:
    llm.garbage("half").reply("whole answer")
    response = await make_llm(llm, backend).stream([{"role": "user", "content": "x"}])
    assert response.content == "whole answer"
    assert len(llm.requests) == 2


async def test_a_stream_that_ends_early_is_retried(llm: ScriptedLLM) -> None:
    # litellm takes a cleanly closed stream for a whole answer; the lean path knows better.
    llm.cut("the first half").reply("the whole answer")
    response = await make_llm(llm, "auto").stream([{"role": "user", "content": "x"}])
    assert response.content == "the whole answer"
    assert len(llm.requests) == 2


async def test_a_server_that_ignores_stream_still_answers(llm: ScriptedLLM) -> None:
    llm.tool_call("read_file", {"path": "a.txt"}, text="Reading.", plain=True)
    llm.reply("done", reasoning="thought", plain=True)
    model = make_llm(llm, "auto")
    first = await model.stream([{"role": "user", "content": "x"}])
    assert first.content == "Reading."
    assert [(c.name, c.arguments) for c in first.tool_calls] == [("read_file", '{"path": "a.txt"}')]
    second = await model.stream([{"role": "user", "content": "x"}])
    assert (second.content, second.reasoning_content) == ("done", "thought")
    assert second.usage["total_tokens"] > 0


async def test_cost_comes_from_the_model_table(llm: ScriptedLLM, backend: str) -> None:
    usage = {"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500}
    llm.reply("priced", usage=usage)
    response = await make_llm(llm, backend, model="openai/gpt-4o-mini").stream(
        [{"role": "user", "content": "x"}]
    )
    # gpt-4o-mini: $0.15 per million prompt tokens, $0.60 per million completion tokens.
    assert response.usage == usage
    assert response.cost == pytest.approx(1000 * 0.15e-6 + 500 * 0.6e-6)


async def test_an_unknown_model_has_no_cost(llm: ScriptedLLM, backend: str) -> None:
    llm.reply("free")
    response = await make_llm(llm, backend).stream([{"role": "user", "content": "x"}])
    assert response.usage and response.cost is None


async def test_openai_itself_gets_its_own_parameters(llm: ScriptedLLM) -> None:
    llm.reply("from a reasoning model").reply("from a chat model")
    reasoning = make_llm(
        llm,
        "auto",
        model="openai/gpt-5-mini",
        api_base="",
        api_key="",
        openai_base=llm.base_url,
        openai_key="sk-from-openai-api-key",
    )
    assert (await reasoning.stream([{"role": "user", "content": "x"}])).content
    sent = llm.requests[0]
    assert sent["model"] == "gpt-5-mini"
    assert sent["max_completion_tokens"] == 4096
    assert "max_tokens" not in sent and "temperature" not in sent
    assert llm.headers[0]["Authorization"] == "Bearer sk-from-openai-api-key"

    chat = make_llm(llm, "auto", model="openai/gpt-4o-mini", api_base="", openai_base=llm.base_url)
    await chat.stream([{"role": "user", "content": "x"}])
    assert llm.requests[1]["temperature"] == 0.1
    assert llm.headers[1]["Authorization"] == "Bearer test-key"


async def test_openai_without_a_key_is_an_auth_error(llm: ScriptedLLM) -> None:
    model = make_llm(llm, "auto", api_base="", api_key="", openai_base=llm.base_url)
    with pytest.raises(LLMError) as caught:
        await model.stream([{"role": "user", "content": "x"}])
    assert caught.value.kind == "auth" and "OPENAI_API_KEY" in str(caught.value)
    assert llm.requests == []


def test_the_lean_path_never_imports_litellm_and_closes_its_pool(llm: ScriptedLLM) -> None:
    llm.reply("lean and quick")
    program = f"""
import asyncio, sys
from agent.llm import LLM, LLMConfig
config = LLMConfig(model="openai/scripted", api_base={llm.base_url!r})
response = asyncio.run(LLM(config).stream([{{"role": "user", "content": "x"}}]))
assert response.content == "lean and quick", response
heavy = sorted(name for name in ("litellm", "openai", "tiktoken") if name in sys.modules)
assert not heavy, heavy
from agent import llm_wire
assert not llm_wire._pools, "the loop's pool outlived it"
"""
    done = subprocess.run(
        [sys.executable, "-X", "dev", "-c", program],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    # The loop's connection pool was closed with the loop, not left to the collector.
    assert "Unclosed" not in done.stderr and "ResourceWarning" not in done.stderr, done.stderr


async def test_other_providers_go_through_litellm(llm: ScriptedLLM) -> None:
    # litellm's hosted_vllm provider speaks OpenAI's protocol, so the scripted server can
    # stand in for it; any provider prefix but openai/ is litellm's.
    llm.reply("via litellm", usage={"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5})
    model = make_llm(llm, "auto", model="hosted_vllm/scripted")
    assert model.wire is None
    response = await model.stream([{"role": "user", "content": "x"}])
    assert response.content == "via litellm"
    assert response.usage["total_tokens"] == 5
    assert llm.requests[0]["model"] == "scripted"


async def test_a_tool_call_sent_as_one_huge_line_arrives_whole(llm: ScriptedLLM) -> None:
    content = "x" * 3_000_000  # three lines of a megabyte each: the scripted server splits it
    llm.tool_call("write_file", {"path": "big.txt", "content": content})
    response = await make_llm(llm, "auto").stream([{"role": "user", "content": "x"}])
    (call,) = response.tool_calls
    assert json.loads(call.arguments) == {"path": "big.txt", "content": content}


async def test_an_error_inside_a_200_answer_is_an_error(llm: ScriptedLLM) -> None:
    llm.fault(200, body={"error": {"message": "model 'x' not found", "code": 404}})
    with pytest.raises(LLMError) as caught:
        await make_llm(llm, "auto").stream([{"role": "user", "content": "x"}])
    assert caught.value.kind == "bad_request" and "not found" in str(caught.value)


async def test_an_error_page_that_is_not_utf8_keeps_its_status(llm: ScriptedLLM) -> None:
    llm.fault(503, raw=b"<html>Service \xe9puis\xe9 \xff</html>").reply("back")
    retried: list[LLMError] = []

    async def on_retry(attempt: int, delay: float, error: LLMError) -> None:
        retried.append(error)

    response = await make_llm(llm, "auto").stream(
        [{"role": "user", "content": "x"}], on_retry=on_retry
    )
    assert response.content == "back"
    assert retried[0].status == 503 and "Service" in str(retried[0])


async def test_an_answer_that_lingers_after_done_is_not_retried(llm: ScriptedLLM) -> None:
    llm.reply("complete", linger=5)
    started = time.monotonic()
    response = await make_llm(llm, "auto", timeout=3.0).stream([{"role": "user", "content": "x"}])
    assert response.content == "complete"
    assert time.monotonic() - started < 2.5 and len(llm.requests) == 1


async def test_netrc_credentials_do_not_clash_with_the_key(
    llm: ScriptedLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login someone password secret\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    llm.reply("fine")
    response = await make_llm(llm, "auto").stream([{"role": "user", "content": "x"}])
    assert response.content == "fine"
    assert llm.headers[0]["Authorization"] == "Bearer test-key"
