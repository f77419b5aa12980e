"""A before_tool hook is a guard, and a guard that cannot run blocks: real hook programs that
crash, cannot start, hang or answer nonsense block the call unless the operator marks them
`"on_error": "allow"`; Python hook functions that fail block too; and text the event cannot
hold as it came (a lone surrogate, a NUL) never keeps a hook from running."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from agent.cleantext import REPLACEMENT
from agent.tools import hooks as hooks_module
from agent.tools.hook_config import FunctionHook, HookSet, load_hooks
from agent.tools.hooks import HookBlocked, TurnHooks
from agent.turn import SessionRef, run_turn
from tests.conftest import folder_of
from tests.llm_server import ScriptedLLM
from tests.test_hooks import AUDIT, hooks_file, read_log, script, tool_results

pytestmark = pytest.mark.django_db(transaction=True)

PY = sys.executable

DENY = """
    import json, sys
    event = json.load(sys.stdin)
    if "marker" in event["arguments"].get("command", ""):
        print("no markers", file=sys.stderr)
        sys.exit(2)
"""
# Hooks that cannot answer, each its own way.
FAILING = {
    "crashes": "import sys; sys.exit('it broke')",
    "hangs": "import time; time.sleep(30)",
    "babbles": "print('this is not JSON')",
    "answers a list": "print('[1, 2]')",
    "rewrites to a non-object": 'import json; print(json.dumps({"arguments": "x"}))',
}


def one_turn(content: str = "go") -> Any:
    return async_to_sync(run_turn)(SessionRef("cli:direct", None), content, channel="cli")


def failing_hook(folder: Path, kind: str) -> list[str]:
    if kind == "cannot start":
        return [str(folder / "no-such-program")]
    return [PY, script(folder, f"{kind.replace(' ', '_')}.py", FAILING[kind])]


@pytest.mark.usefixtures("agent_settings")
def test_a_deny_hook_still_blocks_an_exec_whose_arguments_carry_a_lone_surrogate(
    workspace: Path, llm: ScriptedLLM, tmp_path: Path
) -> None:
    audit_log = tmp_path / "audit.jsonl"
    folder = tmp_path / "scripts"
    hooks_file(
        workspace / "hooks.json",
        {
            "before_tool": [
                {"match": "*", "command": [PY, script(folder, "audit.py", AUDIT), str(audit_log)]},
                {"match": "exec", "command": [PY, script(folder, "deny.py", DENY)]},
            ]
        },
    )
    # JSON-encoded by the scripted model: the surrogate travels as an escape.
    llm.tool_call("exec", {"command": "touch marker # \udc80"}).reply("Done.")

    result = one_turn()

    assert not (folder_of(workspace) / "marker").exists()
    assert result.status == "succeeded"
    assert tool_results(llm.requests[1]) == ["Error: blocked by hook: no markers"]
    [seen] = read_log(audit_log)
    assert seen["arguments"] == {"command": f"touch marker # {REPLACEMENT}"}


@pytest.mark.usefixtures("agent_settings")
@pytest.mark.parametrize("kind", [*FAILING, "cannot start"])
def test_a_before_tool_hook_that_cannot_answer_blocks_the_call(
    workspace: Path, llm: ScriptedLLM, tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    command = failing_hook(tmp_path / "scripts", kind)
    hooks_file(
        workspace / "hooks.json",
        {"before_tool": [{"match": "write_file", "command": command, "timeout": 2}]},
    )
    llm.tool_call("write_file", {"path": "a.txt", "content": "x"}).reply("Done.")

    result = one_turn()

    assert (result.status, result.text) == ("succeeded", "Done.")
    [seen] = tool_results(llm.requests[1])
    assert seen.startswith(
        "Error: blocked by hook: the operator's check of write_file calls could not run ("
    )
    assert seen.endswith("), so this call was not made")
    assert str(tmp_path) not in seen  # the hook's place is the operator's, not the model's
    assert not (folder_of(workspace) / "a.txt").exists()
    assert "the call is blocked" in caplog.text


@pytest.mark.usefixtures("agent_settings")
def test_hooks_marked_allow_let_the_call_pass_when_they_cannot_answer(
    workspace: Path, llm: ScriptedLLM, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "scripts"
    hooks_file(
        workspace / "hooks.json",
        {
            "before_tool": [
                {"command": failing_hook(folder, kind), "on_error": "allow", "timeout": 1}
                for kind in [*FAILING, "cannot start"]
            ]
        },
    )
    llm.tool_call("write_file", {"path": "a.txt", "content": "x"}).reply("Done.")

    assert one_turn().status == "succeeded"

    assert (folder_of(workspace) / "a.txt").read_text() == "x"
    assert caplog.text.count("the call goes on (on_error is allow)") == len(FAILING) + 1


# ---- Python hook functions: no options, fail closed before a tool -----------------------


def crashes(event: dict[str, Any]) -> None:
    raise RuntimeError("a bug in the hook")


def babbles(event: dict[str, Any]) -> str:
    return "yes"


async def rewrites_badly(event: dict[str, Any]) -> dict[str, Any] | None:
    return {"arguments": ["x"]} if event["event"] == "before_tool" else None


@pytest.mark.usefixtures("agent_settings")
@pytest.mark.parametrize("function", ["crashes", "babbles", "rewrites_badly"])
def test_a_hook_function_that_fails_blocks_the_call_and_the_turn_goes_on(
    settings: Any, workspace: Path, llm: ScriptedLLM, function: str
) -> None:
    settings.AGENT_HOOKS = [f"tests.test_hooks_fail_closed:{function}"]
    llm.tool_call("write_file", {"path": "a.txt", "content": "x"}).reply("Done.")

    result = one_turn()

    assert (result.status, result.text) == ("succeeded", "Done.")
    [seen] = tool_results(llm.requests[1])
    assert seen.startswith("Error: blocked by hook: the operator's check of write_file calls")
    assert not (folder_of(workspace) / "a.txt").exists()


_released = threading.Event()


def hangs_for_mallory(event: dict[str, Any]) -> None:
    """A guard that some input makes hang (a pattern that backtracks, a request that never
    answers): mallory's."""
    if event["user"] == "mallory":
        _released.wait(30)


async def test_a_hook_function_one_user_makes_hang_holds_up_no_one_else(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The function's threads were counted per function: four calls of one user that hung
    in it left every other user's calls to wait for a thread, past the hook's time, and
    blocked."""
    monkeypatch.setattr(hooks_module, "DEFAULT_TIMEOUT", 1.0)
    found = HookSet(functions=(FunctionHook("tests:hangs_for_mallory", hangs_for_mallory),))

    def turn_of(user: str) -> TurnHooks:
        return TurnHooks(found, session=f"cli:{user}", user=user, run_id="r", channel="cli")

    try:
        hung = await asyncio.gather(
            *(turn_of("mallory").before_tool("exec", {"command": "x"}) for _ in range(6)),
            return_exceptions=True,
        )
        assert all(isinstance(answer, HookBlocked) for answer in hung)

        arguments = {"command": "ls"}
        assert await turn_of("bob").before_tool("exec", arguments) is arguments
    finally:
        _released.set()


# ---- the event a hook reads, and the option itself ------------------------------------------


async def test_a_hook_reads_an_event_that_held_a_lone_surrogate_and_a_nul(tmp_path: Path) -> None:
    audit_log = tmp_path / "audit.jsonl"
    audit = script(tmp_path / "scripts", "audit.py", AUDIT)
    path = hooks_file(
        tmp_path / "hooks.json", {"before_tool": [{"command": [PY, audit, str(audit_log)]}]}
    )
    found, problems = load_hooks(path, [], required=True)
    assert problems == []
    hooks = TurnHooks(found, session="cli:x\udc80", user=None, run_id="r", channel="cli")

    arguments = {"command": "echo \udc80\x00", "k\udc80": 1}
    assert await hooks.before_tool("exec", arguments) is arguments

    [seen] = read_log(audit_log)
    assert seen["session"] == f"cli:x{REPLACEMENT}"
    assert seen["arguments"] == {
        "command": f"echo {REPLACEMENT}{REPLACEMENT}",
        f"k{REPLACEMENT}": 1,
    }


async def test_a_failing_after_tool_or_turn_hook_still_lets_everything_pass(tmp_path: Path) -> None:
    crash = [PY, script(tmp_path / "scripts", "crash.py", FAILING["crashes"])]
    path = hooks_file(
        tmp_path / "hooks.json",
        {"after_tool": [{"command": crash}], "turn_end": [{"command": crash}]},
    )
    found, _ = load_hooks(path, [], required=True)
    hooks = TurnHooks(found, session="cli:x", user=None, run_id="r", channel="cli")

    assert await hooks.after_tool("exec", {}, "the output") == "the output"
    await hooks.turn_end(status="succeeded")  # no exception: the turn has ended all the same


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ({"command": "true", "on_error": "ignore"}, 'on_error must be "block" or "allow"'),
        ({"command": "true", "on_error": False}, 'on_error must be "block" or "allow"'),
    ],
)
def test_the_system_check_refuses_a_bad_on_error(
    settings: Any, tmp_path: Path, entry: dict[str, Any], problem: str
) -> None:
    from agent.checks import HOOKS_ERROR, check_hooks

    path = hooks_file(tmp_path / "hooks.json", {"before_tool": [entry]})
    settings.AGENT_HOOKS_FILE = str(path)

    [error] = check_hooks()

    assert error.id == HOOKS_ERROR and f"before_tool[0]: {problem}" in error.msg


def test_on_error_is_only_for_before_tool(settings: Any, tmp_path: Path) -> None:
    from agent.checks import check_hooks

    path = tmp_path / "hooks.json"
    path.write_text(json.dumps({"after_tool": [{"command": "true", "on_error": "allow"}]}))
    settings.AGENT_HOOKS_FILE = str(path)

    [error] = check_hooks()

    assert "after_tool[0]: on_error is for before_tool" in error.msg


async def test_a_hook_that_blocks_still_blocks_when_marked_allow(tmp_path: Path) -> None:
    deny = [PY, script(tmp_path / "scripts", "deny.py", DENY)]
    path = hooks_file(
        tmp_path / "hooks.json", {"before_tool": [{"command": deny, "on_error": "allow"}]}
    )
    found, _ = load_hooks(path, [], required=True)
    hooks = TurnHooks(found, session="cli:x", user=None, run_id="r", channel="cli")

    with pytest.raises(HookBlocked, match="no markers"):
        await hooks.before_tool("exec", {"command": "touch marker"})
