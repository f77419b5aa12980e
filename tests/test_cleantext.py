"""Text from outside made valid where it enters: the cleaning functions themselves, the
model's client on both paths (lean and litellm) against the scripted server, whose JSON
carries a lone surrogate and a NUL as escapes as a model sends them, the stream parser's
calls that share an id, and the tool registry, through which every tool result enters."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from agent.cleantext import (
    REPLACEMENT,
    PieceCleaner,
    clean_arguments,
    clean_text,
    clean_value,
)
from agent.llm import wire
from agent.llm.error_kinds import LLMError
from agent.llm.tool_calls import ToolCallAssembler
from agent.tools.base import Tool, ToolContext
from agent.tools.registry import ToolRegistry
from tests.conftest import folder_of, make_llm, stream_pieces
from tests.llm_server import ScriptedLLM

BAD = "one\udc80two\x00three"
CLEAN = f"one{REPLACEMENT}two{REPLACEMENT}three"


def valid(text: str) -> bool:
    """Whether `text` encodes as UTF-8 and holds no NUL: what every store and wire takes."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return "\x00" not in text


# ---- the functions ------------------------------------------------------------------------


def test_clean_text_replaces_lone_surrogates_and_nul_and_joins_a_split_pair() -> None:
    assert clean_text(BAD) == CLEAN
    assert clean_text("\x00") == REPLACEMENT
    assert clean_text("é\x00") == f"é{REPLACEMENT}"  # a NUL in text that is not ASCII
    assert clean_text("\ud800") == REPLACEMENT
    assert clean_text("a\udfff\ud800b") == f"a{REPLACEMENT}{REPLACEMENT}b"
    # A pair standing as two code points is the one character it encodes.
    assert clean_text("smile \ud83d\ude00") == "smile \U0001f600"


@pytest.mark.parametrize("text", ["", "plain ASCII\n" * 100, "héllo wörld — 日本語 \U0001f600"])
def test_clean_text_hands_back_clean_text_itself(text: str) -> None:
    assert clean_text(text) is text


def test_clean_value_cleans_strings_and_keys_at_every_depth() -> None:
    value = {"k\udc80": [BAD, {"deep": (BAD, 3)}], "n": None, "ok": 1.5}
    assert clean_value(value) == {
        f"k{REPLACEMENT}": [CLEAN, {"deep": [CLEAN, 3]}],
        "n": None,
        "ok": 1.5,
    }
    assert valid(json.dumps(clean_value(value), ensure_ascii=False))
    clean = {"a": ["b", {"c": 1}], "d": "é"}
    assert clean_value(clean) is clean


def test_clean_arguments_writes_the_json_again_only_when_its_escapes_stand_for_bad_text() -> None:
    sent = json.dumps({"command": f"echo {BAD}", "x\udc80": ["\ud83d\ude00"]})
    assert "\\udc80" in sent and "\\u0000" in sent  # escapes: the text itself is ASCII

    cleaned = clean_arguments(sent)

    assert json.loads(cleaned) == {"command": f"echo {CLEAN}", f"x{REPLACEMENT}": ["\U0001f600"]}
    assert valid(cleaned)
    # An escaped backslash before "udc80" is text, not an escape: kept as it came.
    literal = '{"path": "C:\\\\udc80"}'
    assert clean_arguments(literal) is literal
    # Text that is not JSON is cleaned as text; its escapes stay text, and harmless.
    assert clean_arguments('{"a": "\\udc80" \x00') == f'{{"a": "\\udc80" {REPLACEMENT}'
    assert clean_arguments(BAD) == CLEAN
    ordinary = '{"path": "notes/a.txt", "content": "héllo"}'
    assert clean_arguments(ordinary) is ordinary


@pytest.mark.parametrize("escape", ["\\udc80", "\\uDFFF", "\\ud800", "\\u0000"])
def test_an_escape_of_any_lone_surrogate_or_a_nul_alone_is_cleaned(escape: str) -> None:
    """A low surrogate's escape (DC00-DFFF) is as bad as a high one's: alone in the
    arguments, it is cleaned all the same."""
    sent = f'{{"command": "echo {escape} there"}}'
    cleaned = clean_arguments(sent)
    assert json.loads(cleaned) == {"command": f"echo {REPLACEMENT} there"}
    assert valid(cleaned)


def test_a_value_nested_too_deeply_to_clean_is_left_for_the_registry_to_refuse() -> None:
    deep = "[" * 50_000 + '"\\udc80"' + "]" * 50_000
    assert clean_arguments(deep) == deep


# ---- the model's client, both paths ---------------------------------------------------------


async def test_the_model_client_cleans_text_reasoning_and_tool_calls(
    llm: ScriptedLLM, backend: str
) -> None:
    llm.tool_calls(
        [("exec\x00", {"command": f"echo {BAD}", "key\udc80": [BAD]})],
        ids=["call\udc80\x00"],
        text=f"Let me look: {BAD}",
        reasoning=f"I think {BAD}",
    )
    response, pieces, thoughts = await stream_pieces(llm, backend, "go")

    assert response.content == f"Let me look: {CLEAN}"
    assert "".join(pieces) == response.content  # what streamed is what is kept
    assert response.reasoning_content == "".join(thoughts) == f"I think {CLEAN}"
    (call,) = response.tool_calls
    assert (call.id, call.name) == (f"call{REPLACEMENT}{REPLACEMENT}", f"exec{REPLACEMENT}")
    assert json.loads(call.arguments) == {"command": f"echo {CLEAN}", f"key{REPLACEMENT}": [CLEAN]}
    assert all(valid(text) for text in (*pieces, *thoughts, call.arguments))


async def test_a_character_sent_as_two_escapes_in_two_events_streams_whole(
    llm: ScriptedLLM, backend: str
) -> None:
    """A server that writes 😀 as the escapes \\ud83d\\ude00 may send them in two events:
    joined, they are the character, not two replacement characters."""
    emoji = "\ud83d\ude00"  # the pair, as two code points; each chunk is one of them
    llm.reply(f"ab{emoji}cd", chunks=6, reasoning=f"hm{emoji}")
    response, pieces, thoughts = await stream_pieces(llm, backend, "go")

    assert response.content == "".join(pieces) == "ab\U0001f600cd"
    assert response.reasoning_content == "".join(thoughts) == "hm\U0001f600"


def test_a_high_surrogate_never_paired_ends_as_a_replacement_character() -> None:
    cleaner = PieceCleaner()
    assert cleaner.piece("x\ud83d") == "x"
    assert cleaner.piece("y") == f"{REPLACEMENT}y"
    assert cleaner.piece("z\ud83d") == "z"
    assert cleaner.rest() == REPLACEMENT
    assert cleaner.rest() == ""


async def test_a_providers_error_message_is_cleaned_too(llm: ScriptedLLM, backend: str) -> None:
    llm.fault(400, body={"error": {"message": f"refused: {BAD}", "type": "invalid_request"}})

    with pytest.raises(LLMError) as caught:
        await make_llm(llm, backend).stream([{"role": "user", "content": "go"}])

    assert caught.value.kind == "bad_request"
    assert valid(str(caught.value)) and valid(caught.value.detail)


async def test_bytes_that_are_not_utf8_become_replacement_characters() -> None:
    event = {"choices": [{"delta": {"content": "caf\u00e9"}, "finish_reason": "stop"}]}
    raw = json.dumps(event, ensure_ascii=False).encode()
    cut = raw.replace("\u00e9".encode(), b"\xc3")  # a character cut in two

    async def body() -> Any:
        yield b"data: " + cut + b"\n\ndata: [DONE]\n\n"

    chunks = [chunk async for chunk in wire.events(body())]

    assert chunks[0]["choices"][0]["delta"]["content"] == f"caf{REPLACEMENT}"


# ---- calls that share an id -----------------------------------------------------------------


def fragment(index: int | None, call_id: str | None, name: str | None, args: str) -> object:
    return SimpleNamespace(
        index=index, id=call_id, function=SimpleNamespace(name=name, arguments=args)
    )


def test_calls_at_two_indexes_stay_two_calls_when_they_share_an_id() -> None:
    assembler = ToolCallAssembler()
    assembler.add(fragment(0, "dup", "read_file", '{"path"'))
    assembler.add(fragment(1, "dup", "list_dir", '{"path"'))
    assembler.add(fragment(0, None, None, ': "a"}'))
    assembler.add(fragment(1, "dup", None, ': "."}'))  # some servers repeat the id
    assembler.add(fragment(2, "dup_2", "glob", '{"pattern": "*"}'))

    calls = assembler.calls()

    assert [(c.name, c.arguments) for c in calls] == [
        ("read_file", '{"path": "a"}'),
        ("list_dir", '{"path": "."}'),
        ("glob", '{"pattern": "*"}'),
    ]
    ids = [c.id for c in calls]
    assert ids[0] == "dup" and len(set(ids)) == 3


def test_without_an_index_a_repeated_id_continues_its_call() -> None:
    assembler = ToolCallAssembler()
    assembler.add(fragment(None, "a", "read_file", '{"pa'))
    assembler.add(fragment(None, "b", "list_dir", "{}"))
    assembler.add(fragment(None, "a", None, 'th": "x"}'))

    assert [(c.id, c.name, c.arguments) for c in assembler.calls()] == [
        ("a", "read_file", '{"path": "x"}'),
        ("b", "list_dir", "{}"),
    ]


async def test_calls_that_share_an_id_run_and_are_answered_each_under_its_own(
    llm: ScriptedLLM, backend: str
) -> None:
    llm.tool_calls(
        [("read_file", {"path": "a.txt"}), ("list_dir", {"path": "."})], ids=["same", "same"]
    )
    response = await make_llm(llm, backend).stream([{"role": "user", "content": "go"}])

    assert [c.name for c in response.tool_calls] == ["read_file", "list_dir"]
    assert json.loads(response.tool_calls[1].arguments) == {"path": "."}
    assert len({c.id for c in response.tool_calls}) == 2


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("agent_settings")
def test_a_turn_answers_calls_that_shared_an_id_each_under_its_own(
    llm: ScriptedLLM, workspace: Path
) -> None:
    from asgiref.sync import async_to_sync

    from agent.turn import SessionRef, run_turn

    (folder_of(workspace) / "a.txt").write_text("from a")
    (folder_of(workspace) / "b.txt").write_text("from b")
    llm.tool_calls(
        [("read_file", {"path": "a.txt"}), ("read_file", {"path": "b.txt"})], ids=["same", "same"]
    ).reply("Read both.")

    result = async_to_sync(run_turn)(SessionRef("cli:direct", None), "read", channel="cli")

    assert (result.status, result.text) == ("succeeded", "Read both.")
    asked, *answers = llm.requests[1]["messages"][-3:]
    ids = [call["id"] for call in asked["tool_calls"]]
    assert ids[0] == "same" and len(set(ids)) == 2
    assert [answer["tool_call_id"] for answer in answers] == ids
    assert ["from a" in answers[0]["content"], "from b" in answers[1]["content"]] == [True, True]


# ---- the registry: what every tool returns, and arguments from anywhere ---------------------


class Echo(Tool):
    """Says back what it was given, and a NUL and a lone surrogate of its own, as a command's
    output or a web page may hold them."""

    name = "echo"
    description = "Say it back."
    parameters = {"type": "object", "properties": {"text": {"type": "string"}}}

    async def execute(self, ctx: ToolContext, text: str = "") -> str:
        if "\x00" in text or "\udc80" in text:
            raise ValueError("embedded null byte")  # what os and subprocess calls raise
        return f"{text} and \x00 and \udc80"


async def test_the_registry_cleans_every_result_and_the_arguments_it_is_handed() -> None:
    registry = ToolRegistry()
    registry.register(Echo())

    result = await registry.execute("echo", {"text": BAD})

    assert result == f"{CLEAN} and {REPLACEMENT} and {REPLACEMENT}"
    raw = await registry.execute("echo", '{"text": "\\u0000"}')
    assert raw == f"{REPLACEMENT} and {REPLACEMENT} and {REPLACEMENT}"
    unknown = await registry.execute("nope\x00", {})
    assert valid(unknown) and unknown.startswith("Error: unknown tool")


async def test_exec_of_a_nul_is_no_unexpected_failure(tmp_path: Path) -> None:
    from agent.tools.guards import Workspace
    from agent.tools.shell import ExecTool

    registry = ToolRegistry()
    registry.register(ExecTool(Workspace(tmp_path), timeout=10))

    result = await registry.execute("exec", '{"command": "\\u0000"}')

    assert "unexpectedly" not in result and valid(result)
