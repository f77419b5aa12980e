"""`manage.py heartbeat`: one heartbeat now, as the scheduled one would run it."""

from __future__ import annotations

import asyncio
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agent.conf import agent_settings
from agent.management.accounts import account
from agent.turn import heartbeat_users, user_heartbeat
from agentsite.database import migrate_embedded


class Command(BaseCommand):
    help = (
        "Run one heartbeat now: for every user whose own HEARTBEAT.md has open tasks, or "
        "for the one named with --user."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", default=None, help="only this account's heartbeat")

    def handle(self, *args: Any, **options: Any) -> None:
        migrate_embedded()
        conf = agent_settings()
        users = [account(options["user"])] if options["user"] else heartbeat_users(conf)
        if not users:
            self.stdout.write("Nothing to do: no user's HEARTBEAT.md has open tasks.")
            return
        failed = []
        with asyncio.Runner() as runner:
            for user in users:
                outcome = runner.run(user_heartbeat(conf, user))
                self.stdout.write(f"{user.get_username()}: {outcome}")
                if outcome in ("failed", "cancelled", "no model"):
                    failed.append(user.get_username())
        if failed:
            raise CommandError(f"the heartbeat of {', '.join(failed)} did not run to its end")
