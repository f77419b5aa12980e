"""The LLM adapter against the scripted server, over real HTTP.

Every test that calls the model runs twice (the `backend` fixture): on the lean path that
speaks OpenAI's protocol itself, and through litellm, so both behave alike. The kinds
failures are sorted into are in test_llm_errors.py; what only the lean path does, in
test_llm_wire.py.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from agent.llm.client import ToolCallAssembler
from agent.llm.error_kinds import LLMError
from tests.conftest import make_llm, stream_pieces
from tests.llm_server import ScriptedLLM


async def test_streams_text_and_collects_usage(llm: ScriptedLLM, backend: str) -> None:
    llm.reply("Hello there, streaming world", chunks=5, reasoning="let me think")
    response, pieces, thoughts = await stream_pieces(llm, backend, "hi")

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
    # The timeout leaves room for a loaded machine to answer the retry; the hang is far longer.
    llm.hang(30).reply("after the hang")
    started = time.monotonic()
    response = await make_llm(llm, backend, timeout=2).stream([{"role": "user", "content": "x"}])
    assert response.content == "after the hang"
    assert time.monotonic() - started < 15


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
    assert len(retried) == 1 and "upstream overloaded" in retried[0].detail
    assert "upstream overloaded" not in str(retried[0])


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
