"""The terminal side of `manage.py agent`: event printers for one-shot and interactive use.

Everything the model wrote (its reply, its reasoning, its tool calls and what they answered)
reaches the terminal through `visible`: a terminal acts on control characters rather than
showing them, and a reply that carries `ESC ] 0 ;` sets the window's title, `ESC [ 2 J`
clears the screen, `ESC ] 52 ;` writes the operator's clipboard."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TextIO

from agent.cleantext import visible
from agent.events import (
    Event,
    MessageEvent,
    StreamChunk,
    StreamEnd,
    Thinking,
    ThinkingFinished,
    ToolCallEvent,
    ToolResult,
)
from agent.loop_messages import call_hint

if TYPE_CHECKING:
    from rich.console import Console
    from rich.live import Live

HINT_ARGUMENT_CHARS = 60
# Of a tool's result, the terminal shows the first lines, as the page's card shows its head.
RESULT_LINES = 6
RESULT_LINE_CHARS = 160


def tool_hint(name: str, arguments: Any) -> str:
    """`write_file(path='hello.txt', content='Hello…')`: enough to follow along."""
    return visible(call_hint(name, arguments, width=HINT_ARGUMENT_CHARS))


def ask_approval(call: dict[str, Any]) -> tuple[bool, bool]:
    """Ask on the terminal whether a call that waits for approval may run: whether it may,
    and whether its tool may from now on in this session ("always"). No answer (end of
    input, Ctrl-C) is a no, and says so."""
    hint = tool_hint(call["name"], call["arguments"])
    while True:
        try:
            answer = input(f"  ? Allow {hint}? [y]es / [n]o / [a]lways: ").strip().lower()
        except (EOFError, KeyboardInterrupt):
            sys.stdout.write("\n  declined\n")
            sys.stdout.flush()
            return False, False
        if answer in ("y", "yes"):
            return True, False
        if answer in ("a", "always"):
            return True, True
        if answer in ("n", "no"):
            return False, False


def usage_line(usage: Mapping[str, Any] | None) -> str:
    """What a run used and cost, as the chat page says it under a reply (`formatUsage` in
    static/chat/util.js): `1,234 tokens · $0.0012`, or the cost unknown when the model has
    no price. Nothing for a run that used no tokens (a slash command's)."""
    tokens = int((usage or {}).get("total_tokens") or 0)
    if not usage or tokens <= 0:
        return ""
    words = f"{tokens:,} token{'' if tokens == 1 else 's'}"
    cost = usage.get("cost")
    if isinstance(cost, int | float):
        return f"{words} · {dollars(cost)}"
    priced = float(usage.get("priced_cost") or 0)
    if not usage.get("unpriced_runs"):
        return words
    return f"{words} · {dollars(priced)} + unpriced" if priced > 0 else f"{words} · cost unknown"


def dollars(amount: float) -> str:
    """`$5.00`, `$0.50`, `$0.00125`: cents, or as many decimals as a small sum needs (six
    at most)."""
    if amount >= 1:
        return f"${amount:.2f}"
    whole, _, decimals = f"{amount:.6f}".rstrip("0").partition(".")
    return f"${whole}.{decimals.ljust(2, '0')}"


def hard_breaks(text: str) -> str:
    """Markdown whose line breaks stay line breaks, as the chat page renders it (a command's
    list, a tool's lines); code blocks are left as they are."""
    lines = text.split("\n")
    fenced = False
    for index, line in enumerate(lines[:-1]):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced and line.strip() and lines[index + 1].strip():
            lines[index] = line + "  "
    return "\n".join(lines)


def result_lines(result: str) -> list[str]:
    """The head of a tool's result, a line each, and how much more there was."""
    lines = visible(result).splitlines() or [""]
    shown = [
        line if len(line) <= RESULT_LINE_CHARS else line[: RESULT_LINE_CHARS - 1] + "…"
        for line in lines[:RESULT_LINES]
    ]
    if len(lines) > RESULT_LINES:
        shown.append(f"… {len(lines) - RESULT_LINES} more lines")
    return shown


def result_heading(event: ToolResult) -> str:
    """`✓ read_file · 12 ms`, or `✗` for a call that failed: the card's heading."""
    mark = "✗" if event.result.startswith("Error") else "✓"
    took = f" · {event.duration_ms} ms" if event.duration_ms is not None else ""
    return f"{mark} {visible(event.name)}{took}"


class PlainPrinter:
    """One-shot mode: the reply streams to stdout as it comes, progress goes to stderr.

    A message that did not stream is held until something follows it: the last one may be
    the turn's failure, which the command says on stderr instead (`finish`)."""

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self.out = out
        self.err = err
        self.streamed = False
        self.at_line_start = True
        self.stream = ""
        self.last_stream = ""
        self.held: str | None = None

    def finish(self, *, succeeded: bool) -> None:
        """The turn is over: show what is held if it was the turn's answer."""
        held, self.held = self.held, None
        if held is not None and succeeded:
            self._say(held)

    async def __call__(self, event: Event) -> None:
        if self.held is not None and not isinstance(event, MessageEvent):
            self.finish(succeeded=True)
        if isinstance(event, StreamChunk):
            self.out.write(visible(event.content))
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
            # What did not stream: a `message` the agent sent mid-turn, a command's answer,
            # or the turn's failure.
            self.finish(succeeded=True)
            self.held = event.content
        elif isinstance(event, ToolCallEvent):
            self._newline()
            self._err(f"  ↳ {tool_hint(event.name, event.arguments)}")
        elif isinstance(event, Thinking):
            self._err(f"  … {visible(event.content)}")

    def _say(self, text: str) -> None:
        self._newline()
        self.out.write(visible(text) + "\n")
        self.out.flush()
        self.streamed = True

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
        # What the run used and cost, once it is recorded (`usage_line`).
        self.usage: dict[str, Any] | None = None

    async def __call__(self, event: Event) -> None:
        from rich.live import Live
        from rich.markdown import Markdown

        if isinstance(event, StreamChunk):
            if self.live is None:
                self.text = ""
                self.live = Live(console=self.console, refresh_per_second=12, transient=False)
                self.live.start()
            self.text += event.content
            self.live.update(Markdown(hard_breaks(visible(self.text))))
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
        elif isinstance(event, ToolResult):
            self._stop_live()
            failed = event.result.startswith("Error")
            self.console.print(
                f"    {result_heading(event)}",
                style="red" if failed else "dim",
                markup=False,
                highlight=False,
            )
            for line in result_lines(event.result):
                self.console.print(
                    f"      {line}", style="dim", markup=False, highlight=False, soft_wrap=True
                )
        elif isinstance(event, Thinking):
            self.console.print(
                f"  … {visible(event.content)}", style="dim italic", markup=False, highlight=False
            )
        elif isinstance(event, ThinkingFinished):
            self.usage = event.usage or self.usage
        elif (
            isinstance(event, MessageEvent) and event.role != "user" and event.content != self.text
        ):
            # The reply did not stream (a command's answer, an error): show it now.
            self.console.print(Markdown(hard_breaks(visible(event.content))))

    def _stop_live(self, *, discarded: bool = False) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None
            if not self.console.is_terminal:
                # rich ends the reply's line itself only at a terminal; in a pipe what
                # follows would run on from its last line.
                self.console.line()
            if discarded:
                self.console.print("  (that answer was cut off; trying again)", style="dim")

    def close(self) -> None:
        self._stop_live()
