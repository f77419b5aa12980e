"""The terminal side of `manage.py agent`: event printers for one-shot and interactive use."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

from agent.events import Event, MessageEvent, StreamChunk, StreamEnd, Thinking, ToolCallEvent

if TYPE_CHECKING:
    from rich.console import Console
    from rich.live import Live

HINT_ARGUMENT_CHARS = 60


def tool_hint(name: str, arguments: Any) -> str:
    """`write_file(path='hello.txt', content='Hello…')`: enough to follow along."""
    if isinstance(arguments, dict):
        parts = []
        for key, value in arguments.items():
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            text = " ".join(str(text).split())
            if len(text) > HINT_ARGUMENT_CHARS:
                text = text[: HINT_ARGUMENT_CHARS - 1] + "…"
            parts.append(f"{key}={text!r}" if isinstance(value, str) else f"{key}={text}")
        return f"{name}({', '.join(parts)})"
    return f"{name}({str(arguments)[:HINT_ARGUMENT_CHARS]})"


def ask_approval(call: dict[str, Any]) -> tuple[bool, bool]:
    """Ask on the terminal whether a call that waits for approval may run: whether it may,
    and whether its tool may from now on in this session ("always"). No answer (end of
    input, Ctrl-C) is a no."""
    hint = tool_hint(call["name"], call["arguments"])
    while True:
        try:
            answer = input(f"  ? Allow {hint}? [y]es / [n]o / [a]lways: ").strip().lower()
        except (EOFError, KeyboardInterrupt):
            sys.stdout.write("\n")
            return False, False
        if answer in ("y", "yes"):
            return True, False
        if answer in ("a", "always"):
            return True, True
        if answer in ("n", "no"):
            return False, False


class PlainPrinter:
    """One-shot mode: the reply streams to stdout as it comes, progress goes to stderr."""

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self.out = out
        self.err = err
        self.streamed = False
        self.at_line_start = True
        self.stream = ""
        self.last_stream = ""

    async def __call__(self, event: Event) -> None:
        if isinstance(event, StreamChunk):
            self.out.write(event.content)
            self.out.flush()
            self.streamed = True
            self.stream += event.content
            self.at_line_start = event.content.endswith("\n")
        elif isinstance(event, StreamEnd):
            if event.discarded:
                self._err("(that answer was cut off; trying again)")
            self.last_stream, self.stream = self.stream, ""
            self._newline()
        elif (
            isinstance(event, MessageEvent)
            and event.role == "assistant"
            and event.content != self.last_stream
        ):
            # What did not stream: a `message` the agent sent mid-turn, a command's answer.
            self._newline()
            self.out.write(event.content + "\n")
            self.out.flush()
            self.streamed = True
        elif isinstance(event, ToolCallEvent):
            self._newline()
            self._err(f"  ↳ {tool_hint(event.name, event.arguments)}")
        elif isinstance(event, Thinking):
            self._err(f"  … {event.content}")

    def _newline(self) -> None:
        if not self.at_line_start:
            self.out.write("\n")
            self.out.flush()
            self.at_line_start = True

    def _err(self, line: str) -> None:
        self.err.write(line + "\n")
        self.err.flush()


class RichPrinter:
    """Interactive mode: the reply is rendered as Markdown while it streams.

    rich's Markdown (markdown-it, pygments) loads here, not for a one-shot `-m` run.
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self.live: Live | None = None
        self.text = ""

    async def __call__(self, event: Event) -> None:
        from rich.live import Live
        from rich.markdown import Markdown

        if isinstance(event, StreamChunk):
            if self.live is None:
                self.text = ""
                self.live = Live(console=self.console, refresh_per_second=12, transient=False)
                self.live.start()
            self.text += event.content
            self.live.update(Markdown(self.text))
        elif isinstance(event, StreamEnd):
            self._stop_live(discarded=bool(event.discarded))
        elif isinstance(event, ToolCallEvent):
            self._stop_live()
            self.console.print(
                f"  ↳ {tool_hint(event.name, event.arguments)}",
                style="dim",
                markup=False,
                highlight=False,
            )
        elif isinstance(event, Thinking):
            self.console.print(
                f"  … {event.content}", style="dim italic", markup=False, highlight=False
            )
        elif (
            isinstance(event, MessageEvent) and event.role != "user" and event.content != self.text
        ):
            # The reply did not stream (a command's answer, an error): show it now.
            self.console.print(Markdown(event.content))

    def _stop_live(self, *, discarded: bool = False) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None
            if discarded:
                self.console.print("  (that answer was cut off; trying again)", style="dim")

    def close(self) -> None:
        self._stop_live()
