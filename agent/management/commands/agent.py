"""`manage.py agent`: talk to the agent from a terminal, one message or interactively.

A tool call that waits for a person (`AGENT_APPROVE_TOOLS`) is asked about on the terminal
in a chat; with `-m` there is no one to ask, so it is declined unless `--yes` allows it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, TextIO, cast
from uuid import UUID

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agent.checks import require_settings
from agent.conf import agent_settings
from agent.doors.terminal import (
    PlainPrinter,
    RichPrinter,
    ask_approval,
    tool_hint,
    usage_line,
    visible,
)
from agent.doors.terminal_input import keys_unechoed, message_reader
from agent.events import Emit
from agent.management.accounts import account
from agent.turn import (
    SessionRef,
    TurnError,
    TurnResult,
    allowed_model,
    answer_approval,
    resume_turn,
    run_turn,
)
from agentsite.database import migrate_embedded

EXIT_WORDS = {"exit", "quit", "/exit", "/quit", ":q"}
CHANNEL = "cli"


class Command(BaseCommand):
    help = "Chat with the agent: one message with -m, or an interactive session without it."
    # The system checks load the URLconf, and with it every view, DRF and the schema
    # generator, for nothing a turn uses; `migrate` and `serve` run them.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("-m", "--message", help="send one message, print the reply, exit")
        parser.add_argument("--session", default="cli:direct", help="session key (cli:direct)")
        parser.add_argument(
            "--model",
            default=None,
            help="model id for this run: AGENT_MODEL or one of AGENT_MODELS",
        )
        parser.add_argument(
            "--user",
            default=None,
            help="the account to work as, in its own folder (default: the first superuser)",
        )
        parser.add_argument(
            "--yes",
            action="store_true",
            help="allow the tool calls that wait for approval (AGENT_APPROVE_TOOLS) without "
            "asking; with -m they are declined otherwise",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["model"]:
            # Before anything else, so that an interactive chat does not refuse every line.
            try:
                allowed_model(options["model"], agent_settings())
            except TurnError as exc:
                raise CommandError(str(exc), returncode=2) from None
        # Its system checks are left out (see above), but not these: a wrong AGENT_TOOLS entry
        # or a broken hooks file refuses the command in one line rather than failing the turn.
        require_settings()
        if options["verbosity"] < 2:
            # The terminal shows retries and failures itself; log lines would repeat them.
            logging.getLogger("agent").setLevel(logging.ERROR)
        # The first thing somebody tries may well be this command, before any `migrate`.
        note = migrate_embedded()
        if note and options["verbosity"]:
            self.stderr.write(note)
        session = SessionRef(options["session"], owner=account(options["user"]))
        # One runner for the whole command: litellm's HTTP clients stay bound to one loop,
        # and Ctrl-C during a turn cancels that turn (recorded as cancelled), not the program.
        self.yes = bool(options["yes"])
        with asyncio.Runner() as runner:
            if options["message"] is not None:
                self._one_shot(runner, options["message"], session, options["model"])
            else:
                self._interactive(runner, session, options["model"])

    def _one_shot(
        self, runner: asyncio.Runner, message: str, session: SessionRef, model: str | None
    ) -> None:
        printer = PlainPrinter(cast(TextIO, self.stdout._out), cast(TextIO, self.stderr._out))
        try:
            result = runner.run(
                run_turn(session, message, channel=CHANNEL, emit=printer, model=model)
            )
            result = self._answer(runner, result, session, printer, self._without_asking)
        except TurnError as exc:
            raise CommandError(str(exc), returncode=2) from None
        except (KeyboardInterrupt, asyncio.CancelledError):
            # Ctrl-C here, or a /stop (or a delete of the session) from elsewhere.
            raise CommandError("stopped", returncode=130) from None
        printer.finish(succeeded=result.success)
        if not result.success:
            # Said once, on stderr: stdout has only what the agent answered.
            raise CommandError(failure_line(result), returncode=1)
        if not printer.streamed:
            self.stdout.write(visible(result.text))

    def _interactive(self, runner: asyncio.Runner, session: SessionRef, model: str | None) -> None:
        from rich.console import Console
        from rich.markup import escape

        console = Console()
        user = f" as [cyan]{escape(session.owner.get_username())}[/]" if session.owner else ""
        read = message_reader(agent_settings().data_dir / "cli_history")
        console.print(
            f"[bold]agentsite[/] · session [cyan]{escape(session.key)}[/]{user} · "
            "/help for commands, exit to leave"
        )
        while True:
            try:
                line = read("› ").strip()
            except (EOFError, KeyboardInterrupt):
                # Ctrl-D or Ctrl-C on an empty line, or the end of what was piped in.
                break
            if line.lower() in EXIT_WORDS:
                break
            if not line:
                continue
            printer = RichPrinter(console)
            ask = self._without_asking if self.yes else ask_approval
            try:
                with keys_unechoed():
                    result = runner.run(
                        run_turn(session, line, channel=CHANNEL, emit=printer, model=model)
                    )
                printer.close()
                self._answer(runner, result, session, printer, ask)
            except TurnError as exc:
                console.print(visible(str(exc)), style="red", markup=False, highlight=False)
                continue
            except (KeyboardInterrupt, asyncio.CancelledError):
                printer.close()
                console.print("[yellow]stopped[/]")
            finally:
                printer.close()
            used = usage_line(printer.usage)
            if used:
                # rich dims it at a terminal only; a pipe gets the words.
                console.print(used, style="dim", markup=False, highlight=False)
        console.print("Bye.")

    def _answer(
        self,
        runner: asyncio.Runner,
        result: TurnResult,
        session: SessionRef,
        printer: Emit,
        ask: Callable[[dict[str, Any]], tuple[bool, bool]],
    ) -> TurnResult:
        """Answer the calls the turn waits on, as `ask` says, and go on with it, until it
        ends without waiting."""
        while result.status == "waiting" and result.run_id is not None:
            run_id = UUID(result.run_id)
            for call in result.pending:
                allow, always = ask(call)
                try:
                    runner.run(
                        answer_approval(
                            owner=session.owner,
                            run_id=run_id,
                            call_id=call["id"],
                            allow=allow,
                            always=always,
                        )
                    )
                except TurnError as exc:  # its time ran out meanwhile, say
                    self.stderr.write(f"  {visible(str(exc))}")
            with keys_unechoed():
                resumed = runner.run(resume_turn(run_id, emit=printer))
            if resumed is None:
                self.stderr.write("  the turn goes on elsewhere (its calls were answered there)")
                break
            result = resumed
        return result

    def _without_asking(self, call: dict[str, Any]) -> tuple[bool, bool]:
        """A call that waits for approval where no one is asked: allowed with --yes."""
        hint = tool_hint(call["name"], call["arguments"])
        verdict = "allowed (--yes)" if self.yes else "declined: give --yes to allow it"
        self.stderr.write(f"  ? {hint} waits for approval: {verdict}")
        return self.yes, False


def failure_line(result: TurnResult) -> str:
    """How the turn failed, in one line; one that could not reach the model names the server
    it tried, which the operator at this terminal may well have mistyped."""
    text = visible(" ".join(result.text.split()))
    if result.error_kind == "transient" and result.endpoint:
        return f"{text} (tried {result.endpoint})"
    return text
