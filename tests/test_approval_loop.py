"""The loop's gate, without Django: a model answer whose calls include one that waits for a
person runs the calls before it and ends waiting; `resume` goes on from the saved turn with
the person's verdicts; a turn with no one to ask refuses such calls at once; and a call that
waited never runs beside another."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.gate import Gate
from tests.llm_server import ScriptedLLM
from tests.test_loop import SYSTEM, make_loop, user
from tests.test_parallel_tools import Timeline, tools


def gated(*names: str, refusal: Any = None) -> Gate:
    return Gate(lambda name: name in names, refusal=refusal)


async def test_the_calls_before_one_that_waits_run_and_the_turn_ends_waiting(
    llm: ScriptedLLM, workspace: Path
) -> None:
    timeline = Timeline()
    llm.tool_calls(
        [
            ("look", {"label": "a"}),
            ("change", {"label": "b"}),
            ("look", {"label": "c"}),
            ("change", {"label": "d"}),
        ]
    )
    loop, events, saved = make_loop(llm, workspace, *tools(timeline))
    loop.gate = gated("change")

    result = await loop.run(SYSTEM, [], user("go"))

    assert result.status == "waiting"
    assert len(llm.requests) == 1
    # a ran; b waits, and so does d; c, after b, waits for it without needing an answer.
    assert list(timeline.spans) == ["a"]
    ids = [call["id"] for call in saved[0]["tool_calls"]]
    assert [(w.id, w.name, w.arguments, w.position) for w in result.waiting] == [
        (ids[1], "change", {"label": "b"}, 1),
        (ids[3], "change", {"label": "d"}, 3),
    ]
    assert [m["role"] for m in saved] == ["assistant", "tool"]
    assert [f["id"] for f in events.frames() if f["type"] == "tool_call"] == [ids[0]]
    assert result.tools_used == ["look"] and result.iterations == 1

    # The person allows b and refuses d: the rest runs in order, then the model goes on.
    llm.reply("Done as far as allowed.")
    turn = [user("go"), *saved]
    resumed = await loop.resume(
        SYSTEM, [], turn, {ids[1]: None, ids[3]: "Error: the user declined change."}, done=result
    )

    assert resumed.status == "succeeded" and resumed.text == "Done as far as allowed."
    assert list(timeline.spans) == ["a", "b", "c"]
    assert timeline.before("b", "c")
    answers = {
        m["tool_call_id"]: m["content"] for m in llm.requests[1]["messages"] if m["role"] == "tool"
    }
    assert answers == {
        ids[0]: "a done",
        ids[1]: "b done",
        ids[2]: "c done",
        ids[3]: "Error: the user declined change.",
    }
    assert resumed.iterations == 2
    assert resumed.tools_used == ["look", "change", "look"]
    declined = [f for f in events.frames() if f["type"] == "tool_result" and f["id"] == ids[3]]
    assert declined[0]["result"] == "Error: the user declined change."


async def test_a_turn_with_no_one_to_ask_refuses_at_once(llm: ScriptedLLM, workspace: Path) -> None:
    timeline = Timeline()
    llm.tool_calls([("change", {"label": "a"}), ("look", {"label": "b"})])
    llm.reply("Could not.")
    loop, _, saved = make_loop(llm, workspace, *tools(timeline))
    loop.gate = gated("change", refusal=lambda name: f"Error: no one to ask for {name}.")

    result = await loop.run(SYSTEM, [], user("go"))

    assert result.status == "succeeded" and result.waiting == []
    assert list(timeline.spans) == ["b"]
    assert saved[1]["content"] == "Error: no one to ask for change."


async def test_an_allowed_call_runs_alone_though_its_tool_is_safe_beside_others(
    llm: ScriptedLLM, workspace: Path
) -> None:
    timeline = Timeline()
    llm.tool_calls([("look", {"label": "a"}), ("look", {"label": "b"})])
    llm.reply("ok")
    loop, _, saved = make_loop(llm, workspace, *tools(timeline))
    loop.gate = gated("look")

    result = await loop.run(SYSTEM, [], user("go"))
    assert result.status == "waiting" and len(result.waiting) == 2
    ids = [w.id for w in result.waiting]
    await loop.resume(SYSTEM, [], [user("go"), *saved], dict.fromkeys(ids), done=result)

    assert timeline.before("a", "b")
