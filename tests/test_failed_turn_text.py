"""What a person reads of a failed model call: the note of a retry under way, and the
answer of a turn that gave up (which part overflowed the context window, and what helps)."""

from __future__ import annotations

import pytest

from agent.events import Collector
from agent.llm.error_kinds import CONNECTION_FAILED, CONTEXT_OVERFLOW, LLMError
from agent.loop_messages import StreamEvents, explain, retry_note, wait_text


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0.6, "0.6 s"),
        (0.04, "0.0 s"),
        (1.25, "1.2 s"),
        (9.94, "9.9 s"),
        (9.96, "10 s"),
        (12.4, "12 s"),
        (-1.0, "0.0 s"),
    ],
)
def test_a_short_wait_keeps_a_decimal_and_a_long_one_is_whole_seconds(
    seconds: float, shown: str
) -> None:
    assert wait_text(seconds) == shown


def test_a_retry_note_is_one_sentence_with_its_wait() -> None:
    error = LLMError(CONNECTION_FAILED, kind="transient")
    assert retry_note(1, 0.6, error) == (
        "The connection to the model server failed: retry 1 in 0.6 s."
    )
    throttled = LLMError("the model provider is limiting requests (HTTP 429)", kind="transient")
    assert retry_note(3, 12.2, throttled) == (
        "The model provider is limiting requests (HTTP 429): retry 3 in 12 s."
    )


async def test_a_retry_is_sent_as_a_note_of_its_own_not_as_reasoning() -> None:
    events = Collector()
    stream = StreamEvents(events)
    await stream.reasoning("Let me think")
    for attempt in (1, 2):
        await stream.retry(attempt, 0.6, LLMError(CONNECTION_FAILED, kind="transient"))
    frames = events.frames()
    assert frames[0] == {"type": "thinking", "content": "Let me think"}
    assert [f.get("note") for f in frames[1:]] == [True, True]
    assert [f["content"] for f in frames[1:]] == [
        "The connection to the model server failed: retry 1 in 0.6 s.",
        "The connection to the model server failed: retry 2 in 0.6 s.",
    ]


def overflow() -> LLMError:
    return LLMError(CONTEXT_OVERFLOW, kind="context_overflow", status=400)


def test_an_overflowing_conversation_suggests_a_shorter_message_or_new() -> None:
    text = explain(overflow(), history_sent=True)
    assert text == (
        "The conversation no longer fits the model's context window. "
        "Send a shorter message, or start afresh with /new."
    )


def test_a_message_too_long_by_itself_does_not_suggest_new() -> None:
    text = explain(overflow(), history_sent=False)
    assert text.startswith("Your message is too long for the model's context window")
    assert "shorter message" in text and "/new" not in text and ".." not in text


def test_a_turn_whose_tools_overflowed_asks_for_less_at_a_time() -> None:
    text = explain(overflow(), history_sent=False, steps_sent=True)
    assert "what this turn's tools returned" in text
    assert "/new" not in text and ".." not in text


@pytest.mark.parametrize("said", ["the model server failed.", "the model server failed"])
def test_an_explanation_has_one_period_between_its_parts(said: str) -> None:
    text = explain(LLMError(said, kind="transient"))
    assert text == "The model server failed. Try again in a moment."
