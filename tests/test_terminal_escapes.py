"""`manage.py agent` never hands the model's control characters to the operator's terminal:
a reply that would set the window's title, clear the screen or write the clipboard (OSC 52)
is printed with each control character written out, on standard output and standard error
alike, and in the approval prompt. Newlines and tabs stay as they are."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agent.cleantext import visible
from tests.conftest import ROOT
from tests.llm_server import ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)

TITLE = "\x1b]0;owned\x07"
CLEAR = "\x1b[2J\x1b[H"
CLIPBOARD = "\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07"
CSI = "\x9b31m"  # the one-character CSI of the C1 controls
REPLY = f"Here{TITLE} you are:{CLEAR}\n\tindented{CLIPBOARD} line\r{CSI}red\x7f"
SHOWN = (
    "Here\\x1b]0;owned\\x07 you are:\\x1b[2J\\x1b[H\n\tindented"
    "\\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\\x07 line\\x0d\\x9b31mred\\x7f"
)
RAW = ("\x1b", "\x07", "\x9b", "\r", "\x7f")


def agent(site_env: dict[str, str], *args: str, stdin: str | None = None, **env: str):
    return subprocess.run(
        [sys.executable, "manage.py", "agent", *args],
        cwd=ROOT,
        env={**site_env, **env},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def assert_no_control(text: str) -> None:
    for character in RAW:
        assert character not in text, repr(text)


def test_visible_writes_out_controls_and_keeps_lines() -> None:
    assert visible(REPLY) == SHOWN
    assert visible("a\tb\nc") == "a\tb\nc"


def test_a_streamed_reply_prints_its_escapes_written_out(
    site_env: dict[str, str], llm: ScriptedLLM
) -> None:
    # One character a chunk: every sequence is split across chunks.
    llm.reply(REPLY, chunks=len(REPLY))

    done = agent(site_env, "-m", "hello")

    assert done.returncode == 0, done.stderr
    assert done.stdout == SHOWN + "\n"
    assert_no_control(done.stderr)


def test_progress_and_tool_hints_print_their_escapes_written_out(
    site_env: dict[str, str], llm: ScriptedLLM
) -> None:
    llm.tool_call("write_file", {"path": f"a{TITLE}.txt", "content": CLIPBOARD})
    llm.tool_call("message", {"content": f"Progress{CLEAR}"})
    llm.reply("Done.", reasoning=f"thinking{TITLE}")

    done = agent(site_env, "-m", "hello")

    assert done.returncode == 0, done.stderr
    assert_no_control(done.stdout)
    assert_no_control(done.stderr)
    assert "↳ write_file(path='a\\x1b]0;owned\\x07.txt', content='\\x1b]52;c;" in done.stderr
    # Reasoning is shown a streamed piece a line.
    thinking = "".join(line.removeprefix("  … ") for line in done.stderr.splitlines()[2:])
    assert thinking == "thinking\\x1b]0;owned\\x07"
    assert done.stdout.splitlines() == ["Progress\\x1b[2J\\x1b[H", "Done."]


def test_the_approval_prompt_prints_its_escapes_written_out(
    site_env: dict[str, str], llm: ScriptedLLM
) -> None:
    llm.tool_call("exec", {"command": f"echo hi{CLIPBOARD}"})
    llm.reply(f"Declined{TITLE}, then.")

    done = agent(site_env, stdin="run it\nn\nquit\n", AGENT_APPROVE_TOOLS="exec")

    assert done.returncode == 0, done.stderr
    assert_no_control(done.stdout)
    assert_no_control(done.stderr)
    assert "Allow exec(command='echo hi\\x1b]52;c;" in done.stdout
    assert "Declined\\x1b]0;owned\\x07, then." in done.stdout

    llm.tool_call("exec", {"command": f"echo hi{CLIPBOARD}"})
    llm.reply("Not run.")
    one_shot = agent(site_env, "-m", "run it", AGENT_APPROVE_TOOLS="exec")
    assert one_shot.returncode == 0, one_shot.stderr
    assert_no_control(one_shot.stderr)
    assert "? exec(command='echo hi\\x1b]52;c;" in one_shot.stderr


def test_a_log_line_naming_what_the_agent_made_prints_its_escapes_written_out(
    site_env: dict[str, str], llm: ScriptedLLM, workspace
) -> None:
    """The agent can make a skill whose folder's name holds escape sequences and whose
    frontmatter does not read: the warning that names it reaches standard error written
    out, as every log line of the site does."""
    from tests.conftest import LOGIN, add_login, folder_of

    add_login(site_env, "!")  # the command works as the first superuser
    skill = folder_of(workspace, LOGIN[0]) / "skills" / f"x{TITLE}{CLEAR}"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: [unclosed\n---\nbody\n")
    llm.reply("Hello.\u202e")

    done = agent(site_env, "-m", "hello")

    assert done.returncode == 0, done.stderr
    assert "has unreadable frontmatter" in done.stderr
    assert f"x{visible(TITLE)}{visible(CLEAR)}" in done.stderr
    assert_no_control(done.stderr)
    assert done.stdout == "Hello.\\u202e\n"
