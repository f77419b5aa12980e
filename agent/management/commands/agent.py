"""`manage.py agent`: talk to the agent from a terminal, one message or interactively."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import Any, TextIO, cast

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agent.checks import require_settings
from agent.conf import agent_settings
from agent.doors.terminal import PlainPrinter, RichPrinter
from agent.management.accounts import account
from agent.turn import SessionRef, TurnError, allowed_model, run_turn
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
        except TurnError as exc:
            raise CommandError(str(exc), returncode=2) from None
        except (KeyboardInterrupt, asyncio.CancelledError):
            # Ctrl-C here, or a /stop (or a delete of the session) from elsewhere.
            raise CommandError("stopped", returncode=130) from None
        if not result.success:
            raise CommandError(result.text, returncode=1)
        if not printer.streamed:
            self.stdout.write(result.text)

    def _interactive(self, runner: asyncio.Runner, session: SessionRef, model: str | None) -> None:
        from rich.console import Console
        from rich.markup import escape

        console = Console()
        user = f" as [cyan]{escape(session.owner.get_username())}[/]" if session.owner else ""
        history = agent_settings().data_dir / "cli_history"
        _load_history(history)
        console.print(
            f"[bold]agentsite[/] · session [cyan]{escape(session.key)}[/]{user} · "
            "/help for commands, exit to leave"
        )
        while True:
            try:
                line = input("› ").strip()
            except (EOFError, KeyboardInterrupt):
                console.print()
                break
            if line.lower() in EXIT_WORDS:
                break
            if not line:
                continue
            _save_history(history)
            printer = RichPrinter(console)
            try:
                runner.run(run_turn(session, line, channel=CHANNEL, emit=printer, model=model))
            except TurnError as exc:
                console.print(str(exc), style="red", markup=False, highlight=False)
                continue
            except (KeyboardInterrupt, asyncio.CancelledError):
                console.print("[yellow]stopped[/]")
                continue
            finally:
                printer.close()


def _load_history(path: Path) -> None:
    with contextlib.suppress(ImportError, OSError):
        import readline

        readline.read_history_file(path)


def _save_history(path: Path) -> None:
    with contextlib.suppress(ImportError, OSError):
        import readline

        path.parent.mkdir(parents=True, exist_ok=True)
        readline.set_history_length(1000)
        readline.write_history_file(path)
