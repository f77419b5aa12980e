"""How the OpenAI door turns a turn's events into stream deltas, and joins the deltas that
leave together."""

from __future__ import annotations

from agent.doors.openai.chat_turn import joined
from agent.doors.openai.progress import Progress
from agent.events import (
    MessageEvent,
    StreamChunk,
    StreamStart,
    Thinking,
    ThinkingFinished,
    ThinkingStarted,
    ToolCallEvent,
    ToolResult,
)


def play(progress: Progress, *events: object) -> list[dict[str, str]]:
    return [delta for event in events for delta in progress.deltas(event)]  # type: ignore[arg-type]


def test_text_streams_as_content_and_the_steps_as_reasoning() -> None:
    progress = Progress()
    deltas = play(
        progress,
        ThinkingStarted(run_id="r"),
        MessageEvent(role="user", content="write it", run_id="r"),
        StreamStart(msg_id="a"),
        StreamChunk(msg_id="a", content="Let me write it."),
        ToolCallEvent(id="c", name="write_file", arguments={"path": "x.txt", "content": "x"}),
        ToolResult(id="c", name="write_file", result="Wrote 1 bytes"),
        Thinking(content="done, now answer"),
        StreamStart(msg_id="b"),
        StreamChunk(msg_id="b", content="Wrote "),
        StreamChunk(msg_id="b", content="x.txt."),
        ThinkingFinished(run_id="r"),
        MessageEvent(role="assistant", content="Wrote x.txt.", run_id="r"),
    )
    content = "".join(d.get("content", "") for d in deltas)
    assert content == "Let me write it.\n\nWrote x.txt."
    reasoning = "".join(d.get("reasoning_content", "") for d in deltas)
    assert '→ write_file {"path": "x.txt", "content": "x"}' in reasoning
    assert "← write_file: Wrote 1 bytes" in reasoning and "done, now answer" in reasoning
    assert progress.rest_of("Wrote x.txt.") == ""


def test_an_answer_that_did_not_stream_comes_at_the_end() -> None:
    progress = Progress()
    assert play(progress, MessageEvent(role="assistant", content="Commands: /new")) == []
    assert progress.rest_of("Commands: /new") == "Commands: /new"

    streamed = Progress()
    play(streamed, StreamStart(msg_id="a"), StreamChunk(msg_id="a", content="partial"))
    assert streamed.rest_of("I stopped after 20 model calls.") == (
        "\n\nI stopped after 20 model calls."
    )


def test_a_message_the_agent_sent_mid_turn_is_content_and_not_repeated() -> None:
    progress = Progress()
    deltas = play(
        progress,
        ThinkingStarted(run_id="r"),
        MessageEvent(role="assistant", content="Heads up: working on it.", run_id="r"),
        ThinkingFinished(run_id="r"),
    )
    assert deltas == [{"content": "Heads up: working on it."}]
    assert progress.rest_of("Heads up: working on it.") == ""


def test_a_long_tool_result_is_shortened_in_the_steps() -> None:
    (delta,) = play(Progress(), ToolResult(id="c", name="read_file", result="x" * 5000))
    assert len(delta["reasoning_content"]) < 600


def test_deltas_of_one_kind_in_a_row_are_joined() -> None:
    deltas = [
        {"content": "a"},
        {"content": "b"},
        {"reasoning_content": "c"},
        {"reasoning_content": "d"},
        {"content": "e"},
    ]
    assert joined(deltas) == [
        {"content": "ab"},
        {"reasoning_content": "cd"},
        {"content": "e"},
    ]


def test_a_retry_note_is_a_line_of_its_own_in_the_reasoning() -> None:
    progress = Progress()
    shown = play(
        progress,
        ThinkingStarted(run_id="r"),
        Thinking(content="Let me see"),
        Thinking(content="The model server failed (HTTP 503): retry 1 in 0.6 s.", note=True),
        Thinking(content="The model server failed (HTTP 503): retry 2 in 1.2 s.", note=True),
    )
    reasoning = "".join(delta["reasoning_content"] for delta in shown)
    assert reasoning.splitlines() == [
        "Let me see",
        "The model server failed (HTTP 503): retry 1 in 0.6 s.",
        "The model server failed (HTTP 503): retry 2 in 1.2 s.",
    ]
