"""Trimming and repairing history."""

from __future__ import annotations

from agent import budget


def call(call_id: str) -> dict:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "x", "arguments": "{}"}}
        ],
    }


def result(call_id: str, text: str = "ok") -> dict:
    return {"role": "tool", "tool_call_id": call_id, "name": "x", "content": text}


def test_repair_drops_orphans_and_duplicate_results() -> None:
    history = [
        result("lost"),
        {"role": "user", "content": "q"},
        call("a"),
        result("a"),
        result("a", "again"),
        call("b"),  # never answered: a crash mid-tool
        {"role": "user", "content": "next"},
        {"role": "assistant", "content": "done"},
    ]
    assert budget.repair(history) == [
        {"role": "user", "content": "q"},
        call("a"),
        result("a"),
        {"role": "user", "content": "next"},
        {"role": "assistant", "content": "done"},
    ]


def test_trim_keeps_calls_with_their_results_and_starts_at_a_user() -> None:
    history = [
        {"role": "user", "content": "old " * 200},
        call("a"),
        result("a", "r" * 300),
        {"role": "user", "content": "new"},
        {"role": "assistant", "content": "fine"},
    ]
    trimmed = budget.trim_history(history, budget.estimate_tokens(history[3:]) + 5)
    assert trimmed == history[3:]
    assert budget.trim_history(history, 0) == []
    assert budget.trim_history(history, 10**6) == history


def test_drop_oldest_half_starts_at_a_user() -> None:
    history = [
        {"role": "user", "content": str(i)}
        if i % 2 == 0
        else {"role": "assistant", "content": str(i)}
        for i in range(8)
    ]
    assert budget.drop_oldest_half(history) == history[4:]
