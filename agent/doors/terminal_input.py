"""What the person at the terminal types into `manage.py agent`'s chat.

At a terminal, a line editor (prompt_toolkit, loaded here only, never for a one-shot `-m`):
a paste of several lines arrives as one message (the terminal's bracketed paste), a line
that ends in a backslash goes on onto the next, Alt-Enter starts a new line, Ctrl-C
clears what was typed or, on an empty line, leaves, and Ctrl-D on an empty line leaves.
Anything else (a pipe, a file) is read a line at a time, a message each."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import History
    from prompt_toolkit.key_binding import KeyBindings

logger = logging.getLogger(__name__)

CONTINUES = "\\"
# As wide as the prompt, so that a message's lines stay aligned.
CONTINUATION_PROMPT = "… "

ReadMessage = Callable[[str], str]


def message_reader(history: Path) -> ReadMessage:
    """How the chat reads a message after showing its prompt: it raises EOFError when the
    person leaves with Ctrl-D (or the input ends) and KeyboardInterrupt with Ctrl-C."""
    if sys.stdin.isatty() and sys.stdout.isatty():
        return EditorReader(history)
    return plain_line


def plain_line(prompt: str) -> str:
    if sys.stdin.isatty():
        # input()'s line editing, for a terminal whose output goes elsewhere.
        with contextlib.suppress(ImportError):
            import readline  # noqa: F401
    try:
        return input(prompt)
    except (EOFError, KeyboardInterrupt):
        # Off the prompt's line, as the line editor leaves it.
        sys.stdout.write("\n")
        raise


class EditorReader:
    """prompt_toolkit's prompt, with its history in `history`."""

    def __init__(self, history: Path) -> None:
        from prompt_toolkit import PromptSession

        self.session: PromptSession[str] = PromptSession(
            history=_history(history),
            key_bindings=_bindings(),
            multiline=True,
            prompt_continuation=CONTINUATION_PROMPT,
        )

    def __call__(self, prompt: str) -> str:
        return self.session.prompt(prompt)


def _bindings() -> KeyBindings:
    from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

    keys = KeyBindings()

    @keys.add("enter")
    def _send_or_go_on(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        if buffer.document.is_cursor_at_the_end and buffer.text.endswith(CONTINUES):
            buffer.delete_before_cursor(len(CONTINUES))
            buffer.newline(copy_margin=False)
        else:
            buffer.validate_and_handle()

    @keys.add("escape", "enter")
    def _new_line(event: KeyPressEvent) -> None:
        event.current_buffer.newline(copy_margin=False)

    @keys.add("c-c")
    def _clear_or_leave(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        if buffer.text:
            buffer.reset()
        else:
            event.app.exit(exception=KeyboardInterrupt, style="class:aborting")

    return keys


def _history(path: Path) -> History:
    from prompt_toolkit.history import FileHistory, InMemoryHistory

    class KeptHistory(FileHistory):
        """A history file that cannot be read or written (a read-only data folder) only
        costs the history, not the chat."""

        def load_history_strings(self) -> Iterable[str]:
            try:
                return list(super().load_history_strings())
            except OSError as exc:
                logger.info("the chat's history could not be read: %s", exc)
                return []

        def store_string(self, string: str) -> None:
            try:
                super().store_string(string)
            except OSError as exc:
                logger.info("the chat's history could not be written: %s", exc)

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return InMemoryHistory()
    return KeptHistory(str(path))


@contextlib.contextmanager
def keys_unechoed() -> Iterator[None]:
    """While a reply streams, what is typed is not echoed: an echoed `^C` (or any key)
    moves the cursor under the reply's live view, which then redraws itself a line lower
    and leaves its first copy standing. What is typed meanwhile waits for the next prompt."""
    if not sys.stdin.isatty():
        yield
        return
    import termios

    fd = sys.stdin.fileno()
    try:
        before = termios.tcgetattr(fd)
    except termios.error:
        yield
        return
    quiet = list(before)
    quiet[3] &= ~termios.ECHO
    termios.tcsetattr(fd, termios.TCSANOW, quiet)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSANOW, before)
