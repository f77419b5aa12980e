"""Operator hooks: real hook programs (Python scripts run with this interpreter) that see,
change and block the agent's tool calls and see its turns start and end, through the
command line and the task API over HTTP; Python hook functions named in `AGENT_HOOKS`; and
a broken hooks file, which start-up refuses and a turn survives."""

from __future__ import annotations

import json
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgiref.sync import async_to_sync

from agent.tools.hooks import HookBlocked
from agent.turn import SessionRef, run_turn
from tests.conftest import LOGIN, folder_of, login_token, manage, run_manage
from tests.llm_server import ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)

PY = sys.executable

GUARD = """
    import json, sys
    event = json.load(sys.stdin)
    command = event["arguments"].get("command", "")
    if command.split()[:1] == ["rm"]:
        print(f"rm is not allowed here ({command})", file=sys.stderr)
        sys.exit(2)
"""
AUDIT = """
    import json, sys
    event = json.load(sys.stdin)
    with open(sys.argv[1], "a") as log:
        log.write(json.dumps(event) + "\\n")
"""
SHOUT = """
    import json, sys
    arguments = json.load(sys.stdin)["arguments"]
    print(json.dumps({"arguments": {**arguments, "content": arguments["content"].upper()}}))
"""
HANG = """
    import os, subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    with open(sys.argv[1], "w") as pids:
        pids.write(f"{os.getpid()} {child.pid}")
    time.sleep(60)
"""
STAMP = """
    import json, sys
    event = json.load(sys.stdin)
    print(json.dumps({"result": event["result"] + " [checked by the operator]"}))
"""
FAIL = """
    import sys
    print("something broke", file=sys.stderr)
    sys.exit(1)
"""
BABBLE = """
    print("this is not JSON")
"""


def script(folder: Path, name: str, code: str) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(textwrap.dedent(code))
    return str(folder / name)


def hooks_file(path: Path, hooks: dict[str, Any]) -> Path:
    path.write_text(json.dumps(hooks))
    return path


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def read_log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"  # a zombie is dead, only unreaped


def one_turn(content: str = "go") -> Any:
    return async_to_sync(run_turn)(SessionRef("cli:direct", None), content, channel="cli")


# ---- through the command line: a blocked rm and an audit log --------------------------


def test_the_command_line_blocks_rm_and_audits_every_call(
    site_env: dict[str, str], workspace: Path, llm: ScriptedLLM, tmp_path: Path
) -> None:
    made = run_manage(
        site_env,
        "shell",
        "-c",
        "from django.contrib.auth.models import User; User.objects.create_superuser('root')",
    )
    assert made.returncode == 0, made.stderr
    audit_log = tmp_path / "audit.jsonl"
    # The file's commands start in its folder: a relative script path is the operator's.
    script(workspace / "hooks", "guard.py", GUARD)
    audit = script(tmp_path / "scripts", "audit.py", AUDIT)
    hooks_file(
        workspace / "hooks.json",
        {
            "before_tool": [
                {"match": "*", "command": [PY, audit, str(audit_log)]},
                {"match": "exec", "command": f"{PY} hooks/guard.py", "timeout": 10},
            ],
            "after_tool": [{"match": "*", "command": [PY, audit, str(audit_log)]}],
        },
    )
    precious = folder_of(workspace, "root") / "notes"
    precious.mkdir()
    llm.tool_call("exec", {"command": "rm -rf notes"})
    llm.tool_call("write_file", {"path": "plan.txt", "content": "keep the notes"})
    llm.reply("I could not remove the notes, so I wrote a plan.")

    done = run_manage(site_env, "agent", "-m", "remove my notes")

    assert done.returncode == 0, done.stderr
    assert done.stdout == "I could not remove the notes, so I wrote a plan.\n"
    [blocked] = tool_results(llm.requests[1])
    assert blocked == "Error: blocked by hook: rm is not allowed here (rm -rf notes)"
    assert precious.is_dir()
    assert (precious.parent / "plan.txt").read_text() == "keep the notes"

    run_id = manage(
        site_env,
        "shell",
        "-v0",
        "-c",
        "from sessions_app.models import Run; print(Run.objects.get().pk)",
    ).strip()
    lines = read_log(audit_log)
    # The blocked call ran no tool, so nothing came after it.
    assert [(line["event"], line["tool"]) for line in lines] == [
        ("before_tool", "exec"),
        ("before_tool", "write_file"),
        ("after_tool", "write_file"),
    ]
    for line in lines:
        assert line["run_id"] == run_id
        assert (line["session"], line["user"], line["channel"]) == ("cli:direct", "root", "cli")
    assert lines[0]["arguments"] == {"command": "rm -rf notes"}
    assert lines[2]["arguments"] == {"path": "plan.txt", "content": "keep the notes"}
    assert "result" not in lines[1]
    assert lines[2]["result"].startswith("Wrote")


# ---- through the task API over HTTP: rewritten arguments, a turn's start and end ------


def test_the_task_api_runs_hooks_that_rewrite_arguments_and_see_the_turn(
    live_site: str, site_env: dict[str, str], workspace: Path, llm: ScriptedLLM, tmp_path: Path
) -> None:
    turn_log = tmp_path / "turns.jsonl"
    audit = script(tmp_path / "scripts", "audit.py", AUDIT)
    shout = script(tmp_path / "scripts", "shout.py", SHOUT)
    hooks_file(
        workspace / "hooks.json",
        {
            "before_tool": [{"match": "write_*", "command": [PY, shout]}],
            "turn_start": [{"command": [PY, audit, str(turn_log)]}],
            "turn_end": [{"command": [PY, audit, str(turn_log)]}],
        },
    )
    llm.tool_call("write_file", {"path": "memo.txt", "content": "quiet words"}).reply("Filed.")
    token = login_token(site_env)

    with httpx.Client(base_url=live_site, timeout=60) as client:
        answer = client.post(
            "/api/tasks",
            json={"prompt": "file a memo"},
            headers={"Authorization": f"Token {token}"},
        )

    assert answer.status_code == 200, answer.text
    task = answer.json()
    assert (task["status"], task["text"]) == ("succeeded", "Filed.")
    assert (folder_of(workspace, LOGIN[0]) / "memo.txt").read_text() == "QUIET WORDS"
    start, end = read_log(turn_log)
    assert start["event"] == "turn_start" and end["event"] == "turn_end"
    assert start["content"] == "file a memo"
    assert start["run_id"] == end["run_id"] == str(task["id"])
    assert start["user"] == LOGIN[0] and start["session"] == task["session"]
    assert (end["status"], end["text"], end["error"]) == ("succeeded", "Filed.", None)
    assert end["tools_used"] == ["write_file"]


# ---- in the turn: timeouts, failures, results ------------------------------------------


@pytest.mark.usefixtures("agent_settings")
def test_a_hook_past_its_timeout_is_killed_with_its_children_and_the_turn_goes_on(
    workspace: Path, llm: ScriptedLLM, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    hang = script(tmp_path / "scripts", "hang.py", HANG)
    hooks_file(
        workspace / "hooks.json",
        {"before_tool": [{"match": "write_file", "command": [PY, hang, str(pids)], "timeout": 1}]},
    )
    llm.tool_call("write_file", {"path": "a.txt", "content": "still here"}).reply("Done.")

    started = time.monotonic()
    result = one_turn()

    assert time.monotonic() - started < 15
    assert (result.status, result.text) == ("succeeded", "Done.")
    # A guard that did not answer in time let nothing through.
    [seen] = tool_results(llm.requests[1])
    assert seen.startswith("Error: blocked by hook: the operator's check of write_file calls")
    assert not (folder_of(workspace) / "a.txt").exists()
    hook_pid, child_pid = (int(pid) for pid in pids.read_text().split())
    deadline = time.monotonic() + 5
    while (alive(hook_pid) or alive(child_pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(hook_pid) and not alive(child_pid)


@pytest.mark.usefixtures("agent_settings")
def test_failing_hooks_marked_allow_let_the_call_pass_and_an_after_hook_replaces_the_result(
    workspace: Path, llm: ScriptedLLM, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "scripts"
    fail, babble = script(folder, "fail.py", FAIL), script(folder, "babble.py", BABBLE)
    allow = {"match": "write_file", "on_error": "allow"}
    hooks_file(
        workspace / "hooks.json",
        {
            "before_tool": [
                {**allow, "command": [PY, fail]},
                {**allow, "command": [PY, babble]},
                {**allow, "command": [str(folder / "no-such-program")]},
            ],
            "after_tool": [{"match": "write_file", "command": [PY, script(folder, "s.py", STAMP)]}],
        },
    )
    llm.tool_call("write_file", {"path": "a.txt", "content": "x"}).reply("Done.")

    result = one_turn()

    assert result.status == "succeeded"
    assert (folder_of(workspace) / "a.txt").read_text() == "x"
    [seen] = tool_results(llm.requests[1])
    assert seen.endswith(" [checked by the operator]") and not seen.startswith("Error")
    assert "exited with 1" in caplog.text and "something broke" in caplog.text
    assert "its output is not JSON" in caplog.text
    assert "could not start" in caplog.text


@pytest.mark.usefixtures("agent_settings")
def test_arguments_a_hook_makes_invalid_are_refused_like_the_models(
    workspace: Path, llm: ScriptedLLM, tmp_path: Path
) -> None:
    spoil = script(
        tmp_path / "scripts",
        "spoil.py",
        'import json; print(json.dumps({"arguments": {"path": 7}}))',
    )
    hooks_file(workspace / "hooks.json", {"before_tool": [{"command": [PY, spoil]}]})
    llm.tool_call("write_file", {"path": "a.txt", "content": "x"}).reply("Done.")

    assert one_turn().status == "succeeded"

    [seen] = tool_results(llm.requests[1])
    assert seen.startswith("Error: invalid arguments for 'write_file' (as a hook rewrote them)")
    assert not (folder_of(workspace) / "a.txt").exists()


# ---- Python hook functions ------------------------------------------------------------

seen_events: list[dict[str, Any]] = []


def guard(event: dict[str, Any]) -> None:
    seen_events.append(event)
    command = event.get("arguments", {}).get("command", "")
    if event["event"] == "before_tool" and command.startswith("rm"):
        raise HookBlocked("no rm, says the guard function")


async def redact(event: dict[str, Any]) -> dict[str, Any] | None:
    if event["event"] == "after_tool" and event["tool"] == "read_file":
        return {"result": event["result"].replace("s3cret", "[redacted]")}
    return None


@pytest.mark.usefixtures("agent_settings")
def test_python_hook_functions_block_rewrite_and_see_the_turn(
    settings: Any, workspace: Path, llm: ScriptedLLM
) -> None:
    settings.AGENT_HOOKS = ["tests.test_hooks:guard", "tests.test_hooks:redact"]
    seen_events.clear()
    (folder_of(workspace) / "keys.txt").write_text("password: s3cret\n")
    llm.tool_call("exec", {"command": "rm -rf ."})
    llm.tool_call("read_file", {"path": "keys.txt"})
    llm.reply("Done.")

    result = one_turn("tidy up")

    assert result.status == "succeeded"
    assert tool_results(llm.requests[1]) == [
        "Error: blocked by hook: no rm, says the guard function"
    ]
    read = tool_results(llm.requests[2])[1]
    assert "[redacted]" in read and "s3cret" not in read
    assert [(e["event"], e.get("tool")) for e in seen_events] == [
        ("turn_start", None),
        ("before_tool", "exec"),
        ("before_tool", "read_file"),
        ("after_tool", "read_file"),
        ("turn_end", None),
    ]
    assert {e["run_id"] for e in seen_events} == {result.run_id}
    assert seen_events[-1]["status"] == "succeeded" and seen_events[-1]["text"] == "Done."


# ---- a broken hooks file ----------------------------------------------------------------

BROKEN = {
    "{not json": "is not valid JSON",
    '["exec"]': "must hold a JSON object of events, not a list",
    '{"before_call": []}': "unknown event 'before_call'",
    '{"before_tool": [{"match": "exec"}]}': "before_tool[0]: command is missing",
    '{"before_tool": [{"match": "exec", "command": "  "}]}': "before_tool[0]: command is empty",
    '{"after_tool": [{"match": 3, "command": "true"}]}': "after_tool[0]: match must be",
    '{"turn_end": [{"command": "true", "timeout": "soon"}]}': "turn_end[0]: timeout must be",
    '{"turn_start": [{"command": "true", "timout": 3}]}': "turn_start[0]: unknown key 'timout'",
}


@pytest.mark.parametrize("text", BROKEN)
def test_the_system_check_names_the_file_and_what_is_wrong(
    settings: Any, tmp_path: Path, text: str
) -> None:
    from agent.checks import HOOKS_ERROR, check_hooks

    path = tmp_path / "hooks.json"
    path.write_text(text)
    settings.AGENT_HOOKS_FILE = str(path)

    [error] = check_hooks()

    assert error.id == HOOKS_ERROR
    assert error.msg.startswith(f"AGENT_HOOKS_FILE: {path}")
    assert BROKEN[text] in error.msg


def test_the_system_check_names_a_missing_named_file_and_a_function_that_does_not_import(
    settings: Any, tmp_path: Path, workspace: Path
) -> None:
    from agent.checks import check_hooks

    settings.AGENT_WORKSPACE = workspace
    assert check_hooks() == []  # no hooks.json in the workspace: no hooks
    settings.AGENT_HOOKS_FILE = str(tmp_path / "gone.json")
    settings.AGENT_HOOKS = ["tests.test_hooks:guard", "no_such_module:hook", "tests.test_hooks:PY"]

    assert [error.msg for error in check_hooks()] == [
        f"AGENT_HOOKS_FILE: {tmp_path / 'gone.json'} does not exist",
        "AGENT_HOOKS: 'no_such_module:hook' cannot be imported: No module named 'no_such_module'",
        "AGENT_HOOKS: 'tests.test_hooks:PY' is not callable but 'str'",
    ]


def test_manage_py_check_and_the_start_commands_refuse_a_broken_file(
    site_env: dict[str, str], workspace: Path
) -> None:
    (workspace / "hooks.json").write_text('{"before_tool": [{"match": "exec"}]}')
    line = f"AGENT_HOOKS_FILE: {workspace / 'hooks.json'}: before_tool[0]: command is missing"

    checked = run_manage(site_env, "check")
    assert checked.returncode != 0
    assert f"(agent.E002) {line}" in checked.stderr

    for command in (["agent", "-m", "hello"], ["qcluster"]):
        refused = run_manage(site_env, *command)
        assert refused.returncode != 0
        assert "Traceback" not in refused.stderr
        assert refused.stderr.strip().splitlines() == [f"error: {line}"]


@pytest.mark.usefixtures("agent_settings")
def test_a_file_broken_while_the_site_runs_blocks_every_tool_call_until_it_is_mended(
    workspace: Path, llm: ScriptedLLM, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    guard_script = script(tmp_path / "scripts", "guard.py", GUARD)
    path = workspace / "hooks.json"
    path.write_text('{"before_tool": [{"match": "exec", "command": ')
    llm.tool_call("write_file", {"path": "a.txt", "content": "x"}).reply("Done.")

    # The turn goes on and says why; the call its guard could not see is not made.
    assert one_turn().status == "succeeded"
    assert f"AGENT_HOOKS_FILE: {path} is not valid JSON" in caplog.text
    [result] = tool_results(llm.requests[-1])
    assert result.startswith("Error: blocked by hook: the operator's checks of tool calls")
    assert "error, which the server's log names" in result
    assert not (folder_of(workspace) / "a.txt").exists()

    path.write_text("{}")
    llm.tool_call("write_file", {"path": "a.txt", "content": "x"}).reply("Done.")
    assert one_turn().status == "succeeded"

    hooks_file(path, {"before_tool": [{"match": "exec", "command": [PY, guard_script]}]})
    llm.tool_call("exec", {"command": "rm a.txt"}).reply("Done.")

    assert one_turn().status == "succeeded"
    assert tool_results(llm.requests[-1])[-1].startswith("Error: blocked by hook: rm is not")
    assert (folder_of(workspace) / "a.txt").exists()
