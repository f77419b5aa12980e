"""`manage.py serve`: the site (daphne) and the task worker (django-q2) together.

Ctrl-C, SIGTERM, or either process dying stops both.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

GRACE_SECONDS = 10


class Command(BaseCommand):
    help = "Serve the site with daphne and run the django-q2 worker beside it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--no-worker", action="store_true", help="serve the site only")

    def handle(self, *args: Any, **options: Any) -> None:
        commands = {
            "web": [
                sys.executable,
                "-m",
                "daphne",
                "-b",
                options["host"],
                "-p",
                str(options["port"]),
                "agentsite.asgi:application",
            ],
        }
        if not options["no_worker"]:
            commands["worker"] = [sys.executable, "manage.py", "qcluster"]
        # Own sessions, so a terminal's Ctrl-C reaches only this process, which then stops
        # each child once and in order.
        children = {
            name: subprocess.Popen(cmd, start_new_session=True) for name, cmd in commands.items()
        }
        self.stdout.write(f"Serving http://{options['host']}:{options['port']}/ (Ctrl-C stops)")

        stopping = False

        def stop(signum: int, frame: object) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        while not stopping:
            ended = [name for name, child in children.items() if child.poll() is not None]
            if ended:
                self.stderr.write(f"{', '.join(ended)} stopped; stopping the rest")
                break
            time.sleep(0.2)
        self._stop_all(children)

    def _stop_all(self, children: dict[str, subprocess.Popen[bytes]]) -> None:
        for child in children.values():
            if child.poll() is None:
                child.terminate()
        deadline = time.monotonic() + GRACE_SECONDS
        for child in children.values():
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
