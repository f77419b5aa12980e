"""`manage.py agent` at a real terminal: a pty is its stdin, stdout and stderr, and what a
person types (a paste, a continued line, Ctrl-C, Ctrl-D) is written to the other end."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pyte
import pytest

from agent.tools.guards.folders import user_folder
from tests.conftest import ROOT
from tests.llm_server import ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)

ROWS, COLUMNS = 60, 100
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"
CTRL_C, CTRL_D = "\x03", "\x04"
WAITS = {"AGENT_APPROVE_TOOLS": "write_file"}


class Screen(pyte.Screen):
    """The terminal's screen; it answers where its cursor is, as a terminal does when a
    program asks (prompt_toolkit does, before each prompt)."""

    def __init__(self, answer: Callable[[str], None]) -> None:
        super().__init__(COLUMNS, ROWS)
        self.answer = answer

    def write_process_input(self, data: str) -> None:
        self.answer(data)


class Terminal:
    """`manage.py agent` on a pty, seen through a terminal emulator: `send` types, and
    `wait_for` waits for the screen to show something."""

    def __init__(self, env: dict[str, str]) -> None:
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "agent"],
            cwd=ROOT,
            env={**env, "TERM": "xterm-256color"},
            stdin=slave,
            stdout=slave,
            stderr=slave,
            # Its own session, with the pty as its controlling terminal: Ctrl-C there
            # interrupts it, as at a person's terminal.
            start_new_session=True,
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
        )
        os.close(slave)
        self.raw = b""
        self.screen = Screen(self.send)
        self._stream = pyte.ByteStream(self.screen)
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 4096)
            except OSError:  # the child closed its end
                return
            if not data:
                return
            with self._lock:
                self.raw += data
                self._stream.feed(data)

    @property
    def lines(self) -> list[str]:
        with self._lock:
            return [line.rstrip() for line in self.screen.display]

    @property
    def text(self) -> str:
        return "\n".join(self.lines).strip()

    @property
    def at_prompt(self) -> bool:
        """The cursor waits on an empty prompt."""
        with self._lock:
            return self.screen.display[self.screen.cursor.y].rstrip() == "›"

    def send(self, text: str) -> None:
        os.write(self.master, text.encode())

    def wait_for(self, what: str | Callable[[], bool], timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if what() if callable(what) else what in self.text:
                return
            time.sleep(0.05)
        raise AssertionError(f"{what!r} did not come; the screen:\n{self.text}")

    def wait_for_prompt(self) -> None:
        self.wait_for(lambda: self.at_prompt)

    def wait(self, timeout: float = 30.0) -> int:
        code = self.process.wait(timeout=timeout)
        self._reader.join(timeout=5)
        return code

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        os.close(self.master)


Start = Callable[..., Terminal]


@pytest.fixture
def terminal(site_env: dict[str, str]) -> Iterator[Start]:
    """Starts the chat on a terminal of its own, with more settings if given, and waits for
    its prompt."""
    started: list[Terminal] = []

    def start(**extra_env: str) -> Terminal:
        term = Terminal({**site_env, **extra_env})
        started.append(term)
        term.wait_for_prompt()
        return term

    yield start
    for term in started:
        term.close()


def user_messages(llm: ScriptedLLM) -> list[str]:
    """What the last request sent as the user's, without the time the site puts before the
    newest message."""
    return [
        re.sub(r"^\[Current time: [^]]*\]\n\n", "", m["content"])
        for m in llm.requests[-1]["messages"]
        if m["role"] == "user"
    ]


def test_a_pasted_block_of_lines_is_one_message(terminal: Start, llm: ScriptedLLM) -> None:
    llm.reply("Got both lines.")
    term = terminal()
    # A terminal sends a paste's line breaks as Enter presses, between the paste's brackets.
    term.send(f"{PASTE_START}first pasted line\rsecond pasted line{PASTE_END}")
    term.wait_for("second pasted line")
    time.sleep(0.3)
    assert llm.requests == []  # the paste's line break did not send it
    term.send("\r")
    term.wait_for("Got both lines.")
    term.wait_for_prompt()
    assert len(llm.requests) == 1
    assert user_messages(llm) == ["first pasted line\nsecond pasted line"]
    # The message stays on the screen as it was sent, its second line under the first.
    assert [line for line in term.lines if "pasted line" in line] == [
        "› first pasted line",
        "… second pasted line",
    ]


def test_a_line_ending_in_a_backslash_goes_on_onto_the_next(
    terminal: Start, llm: ScriptedLLM
) -> None:
    llm.reply("Read as one.")
    term = terminal()
    term.send("one thing \\\r")
    term.wait_for(lambda: term.lines[term.screen.cursor.y] == "…")
    assert llm.requests == []
    term.send("and another\r")
    term.wait_for("Read as one.")
    term.wait_for_prompt()
    assert len(llm.requests) == 1
    assert user_messages(llm) == ["one thing \nand another"]


def test_ctrl_c_mid_reply_stops_it_and_shows_the_partial_text_once(
    terminal: Start, llm: ScriptedLLM
) -> None:
    # Two pieces, three seconds apart: the first line shows, Ctrl-C comes before the second.
    llm.reply("First line of the answer.\nSecond line, never reached", chunks=2, chunk_delay=3)
    llm.reply("Still here.")
    term = terminal()
    term.send("tell me\r")
    term.wait_for("First line of the answer.")
    term.send(CTRL_C)
    term.wait_for("stopped")
    term.wait_for_prompt()
    assert term.lines.count("First line of the answer.") == 1, term.text
    assert "Second line" not in term.text
    assert "^C" not in term.text
    # The chat goes on.
    term.send("are you there?\r")
    term.wait_for("Still here.")
    assert user_messages(llm) == ["tell me", "are you there?"]


def test_ctrl_c_at_an_approval_prompt_declines_the_call_and_says_so(
    terminal: Start, llm: ScriptedLLM, workspace: Path
) -> None:
    llm.tool_call("write_file", {"path": "a.txt", "content": "A"}).reply("Not written, then.")
    term = terminal(**WAITS)
    term.send("write a.txt\r")
    term.wait_for("? Allow write_file(path='a.txt', content='A')? [y]es / [n]o / [a]lways:")
    term.send(CTRL_C)
    term.wait_for("Not written, then.")
    term.wait_for_prompt()
    asked = next(i for i, line in enumerate(term.lines) if "? Allow write_file(" in line)
    assert term.lines[asked + 1].strip() == "declined"
    assert not (user_folder(workspace, None) / "a.txt").exists()
    (tool,) = [m for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert tool["content"].startswith("Error: the user declined write_file(")


def test_ctrl_c_clears_a_typed_line_and_at_an_empty_prompt_leaves(
    terminal: Start, llm: ScriptedLLM
) -> None:
    term = terminal()
    term.send("half a thought")
    term.wait_for("› half a thought")
    term.send(CTRL_C)
    term.wait_for_prompt()  # only the line went
    assert term.process.poll() is None
    term.send(CTRL_C)
    term.wait_for("Bye.")
    assert term.wait() == 0
    assert llm.requests == []
    assert "Traceback" not in term.text


def test_ctrl_d_leaves(terminal: Start, llm: ScriptedLLM) -> None:
    term = terminal()
    term.send(CTRL_D)
    term.wait_for("Bye.")
    assert term.wait() == 0
    assert "Traceback" not in term.text


def test_each_reply_is_followed_by_what_it_used_and_cost(terminal: Start, llm: ScriptedLLM) -> None:
    usage = {"prompt_tokens": 1000, "completion_tokens": 234, "total_tokens": 1234}
    llm.reply("A priced answer.", usage=usage)
    prices = '{"openai/scripted": {"input": 1, "output": 2}}'  # USD per million tokens
    term = terminal(AGENT_MODEL_PRICES=prices)
    term.send("hello\r")
    term.wait_for("A priced answer.")
    term.wait_for_prompt()
    lines = [line for line in term.lines if line]
    assert lines[-3:] == ["A priced answer.", "1,234 tokens · $0.001468", "›"]
    # Dimmed: the reply's footnote, not part of it.
    assert b"\x1b[2m1,234 tokens \xc2\xb7 $0.001468" in term.raw
    # A slash command calls no model, and has no such line.
    term.send("/help\r")
    term.wait_for("/model NAME")
    term.wait_for_prompt()
    assert term.text.count("tokens ·") == 1
