"""Repairing history and fitting a model call's messages into its window."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agent import budget
from agent.tokens import TokenCounter, estimate


def call(call_id: str, *more: str) -> dict:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "x", "arguments": "{}"}}
            for i in (call_id, *more)
        ],
    }


def result(call_id: str, text: str = "ok") -> dict:
    return {"role": "tool", "tool_call_id": call_id, "name": "x", "content": text}


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def count(message: dict) -> int:
    return 1 + len(message.get("content") or "") // 10


SYSTEM = {"role": "system", "content": "be brief"}


def test_repair_drops_orphans_and_duplicates() -> None:
    history = [
        result("lost"),
        user("q"),
        call("a"),
        result("a"),
        result("a", "again"),
        call("a"),  # saved twice: the write ran again after its reply was lost
        result("a"),
        call("b"),  # never answered: a crash mid-tool
        user("next"),
        {"role": "assistant", "content": "done"},
    ]
    assert budget.repair(history) == [
        user("q"),
        call("a"),
        result("a"),
        user("next"),
        {"role": "assistant", "content": "done"},
    ]


def test_fit_drops_old_history_whole_and_starts_at_a_user() -> None:
    history = [
        user("old " * 200),
        call("a"),
        result("a", "r" * 300),
        user("new"),
        {"role": "assistant", "content": "fine"},
    ]
    turn = [user("now")]
    everything = [SYSTEM, *history, *turn]
    assert budget.fit(SYSTEM, history, turn, limit=10**6, count=count) == everything
    # Room for the call's result but not for its call and the user before it.
    tight = sum(map(count, [SYSTEM, *history[1:], *turn]))
    assert budget.fit(SYSTEM, history, turn, limit=tight, count=count) == [
        SYSTEM,
        *history[3:],
        *turn,
    ]
    assert budget.fit(SYSTEM, history, turn, limit=0, count=count) == [SYSTEM, *turn]


def test_a_turn_that_outgrows_the_window_shortens_then_drops_its_oldest_results() -> None:
    turn = [
        user("read them all"),
        call("1"),
        result("1", "a" * 5_000),
        call("2"),
        result("2", "b" * 5_000),
        call("3"),
        result("3", "c" * 5_000),
    ]
    every = sum(map(count, [SYSTEM, *turn]))

    shortened = budget.fit(SYSTEM, [], turn, limit=every - 300, count=count)
    assert [m["role"] for m in shortened] == ["system", "user", *["assistant", "tool"] * 3]
    assert "more characters cut to fit the context window" in shortened[3]["content"]
    assert shortened[3]["content"].startswith("a" * budget.SHORTENED_CHARS)
    assert shortened[7] is turn[6]  # the newest result stays whole while it can
    assert turn[2]["content"] == "a" * 5_000  # what is stored is never changed

    dropped = budget.fit(SYSTEM, [], turn, limit=count(SYSTEM) + count(turn[0]) + 150, count=count)
    assert dropped[:2] == [SYSTEM, turn[0]]
    assert [m.get("tool_call_id") for m in dropped[2:] if m["role"] == "tool"] == ["3"]
    assert dropped[2]["tool_calls"][0]["id"] == "3"


# ---- the invariant, on random histories ----------------------------------------------

texts = st.text(alphabet="ab ", max_size=400)


@st.composite
def steps(draw: Any, prefix: str) -> list[dict]:
    """Messages a turn leaves behind: a user message, tool calls with their results (some
    with several calls at once), and a final answer."""
    messages = [user(draw(texts))]
    for index in range(draw(st.integers(0, 3))):
        ids = [f"{prefix}{index}.{n}" for n in range(draw(st.integers(1, 3)))]
        messages.append(call(*ids))
        messages.extend(result(i, draw(texts)) for i in ids)
    messages.append({"role": "assistant", "content": draw(texts)})
    return messages


@st.composite
def conversations(draw: Any) -> tuple[list[dict], list[dict]]:
    history = [m for n in range(draw(st.integers(0, 6))) for m in draw(steps(f"h{n}."))]
    current = draw(steps("t."))[:-1]  # the turn in progress: no answer yet
    return history, current


def assert_whole(messages: list[dict]) -> None:
    """Every call is followed by all its results and every result follows its call."""
    open_calls: set[str] = set()
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in open_calls, "a result without its call"
            open_calls.discard(message["tool_call_id"])
            continue
        assert not open_calls, "a call without its result"
        open_calls = {c["id"] for c in message.get("tool_calls") or ()}
    assert not open_calls, "a call without its result"


@settings(max_examples=300, deadline=None)
@given(conversation=conversations(), limit=st.integers(0, 1_500))
def test_fit_never_splits_a_call_from_its_results(
    conversation: tuple[list[dict], list[dict]], limit: int
) -> None:
    history, turn = conversation
    sent = budget.fit(SYSTEM, history, turn, limit=limit, count=count)

    assert sent[0] is SYSTEM
    assert turn[0] in sent  # the user's message always goes
    assert_whole(sent)
    after_system = sent[1:]
    assert after_system[0]["role"] == "user"  # history starts at a user message
    position = sent.index(turn[0])
    if len(turn) > 1:  # the newest step of the turn always goes
        assert sent[-1]["tool_call_id"] == turn[-1]["tool_call_id"]
    if sum(map(count, sent)) > limit:  # over only when nothing more could go
        assert sent[1:position] == []
        assert sum(1 for m in sent[position:] if m.get("tool_calls")) <= 1


def test_the_estimate_is_above_a_real_tokenizer() -> None:
    # Random-looking text (base64, hashes) can cost more than any rate short of a token a
    # character; an overflow the estimate missed is caught and retried smaller instead.
    counter = TokenCounter("openai/gpt-4o-mini")
    exact = budget_encoder(counter)
    for text in ["plain English words, " * 50, "def f(x):\n    return x * 2\n" * 40,
                 "1234567890" * 80, "日本語のテキスト" * 60, "Привет, мир! " * 60]:  # fmt: skip
        assert estimate(text) >= exact(text), text[:20]


def budget_encoder(counter: TokenCounter) -> Any:
    import asyncio

    assert asyncio.run(counter.load_exact()), "litellm ships o200k_base for offline use"
    assert counter.exact is not None
    return counter.exact


def test_exact_counting_works_offline_without_importing_litellm() -> None:
    from tests.conftest import python

    program = (
        "import asyncio, sys\n"
        "from agent.tokens import TokenCounter\n"
        "counter = TokenCounter('openai/gpt-4o-mini')\n"
        "assert asyncio.run(counter.load_exact())\n"
        "assert counter.text('hello world') == 2, counter.text('hello world')\n"
        "assert 'litellm' not in sys.modules\n"
    )
    # No network: a proxy that does not exist would fail any download.
    env = {
        "PATH": "/usr/bin:/bin",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "HTTP_PROXY": "http://127.0.0.1:9",
    }
    done = python(program, env)
    assert done.returncode == 0, done.stderr


def test_every_model_tiktoken_knows_is_counted_exactly() -> None:
    from tests.conftest import python

    # tiktoken's own names: Azure's deployment names, dated and newer releases; other
    # providers' models are estimated.
    program = (
        "import asyncio\n"
        "from agent.tokens import TokenCounter\n"
        "for model in ('azure/gpt-35-turbo', 'openai/gpt-4.1-mini', 'openai/o3', "
        "'openai/gpt-4o-2024-08-06'):\n"
        "    assert asyncio.run(TokenCounter(model).load_exact()), model\n"
        "assert not asyncio.run(TokenCounter('hosted_vllm/llama-3.1-8b').load_exact())\n"
    )
    done = python(program, {"PATH": "/usr/bin:/bin", "HTTPS_PROXY": "http://127.0.0.1:9"})
    assert done.returncode == 0, done.stderr


def test_loading_a_tokenizer_changes_no_environment_from_its_thread(
    monkeypatch: Any,
) -> None:
    import asyncio
    import os
    import threading

    from agent import tokens

    changed: list[tuple[str, str]] = []

    def watched(method: str) -> Any:
        original = getattr(os._Environ, method)

        def change(self: Any, key: str, *value: str) -> None:
            changed.append((key, threading.current_thread().name))
            original(self, key, *value)

        return change

    monkeypatch.setattr(os._Environ, "__setitem__", watched("__setitem__"))
    monkeypatch.setattr(os._Environ, "__delitem__", watched("__delitem__"))
    tokens._encoder.cache_clear()  # loaded afresh, in its thread
    assert asyncio.run(TokenCounter("openai/gpt-4o-mini").load_exact())
    assert changed == []
