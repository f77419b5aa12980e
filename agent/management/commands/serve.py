"""`manage.py serve`: the site (daphne) and the task worker (django-q2) together.

Ctrl-C, SIGTERM, or either process dying stops both, with every process each one started.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agent.checks import BriefChecks
from agent.conf import agent_settings
from agent.tools.sandbox import startup_warning
from agentsite.database import require_migrated

logger = logging.getLogger(__name__)

GRACE_SECONDS = 10
WEBSOCKET_CONNECT_TIMEOUT = 20


LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


def check_reachable_names(host: str) -> None:
    """A site served beyond this machine must be told the names it answers to: with the
    loopback-only default it would answer every request with 400."""
    if host in LOOPBACK or settings.DEBUG:
        return
    if not set(settings.ALLOWED_HOSTS) - LOOPBACK:
        raise CommandError(
            f"serving on {host} needs DJANGO_ALLOWED_HOSTS: the names this site answers to "
            "(e.g. DJANGO_ALLOWED_HOSTS=agents.example.com), and DJANGO_CSRF_TRUSTED_ORIGINS "
            "if its pages come through another origin (https://agents.example.com)"
        )


def check_port_free(host: str, port: int) -> None:
    """Bind the address as daphne will, so that a taken port stops us before any child
    starts, rather than after the worker is already up beside a daphne that failed."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise CommandError(f"cannot serve on {host}:{port}: {exc.strerror}") from exc
    with socket.socket(family, kind, proto) as probe:
        # Daphne (Twisted) sets SO_REUSEADDR too: a port left in TIME_WAIT by the last run is
        # free to it, and must be to this check.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
            probe.listen()
        except OSError as exc:
            raise CommandError(
                f"cannot serve on {host}:{port}: {exc.strerror}; stop what uses it or pick "
                "another port with --port"
            ) from exc


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    # PermissionError: the id now names another user's group, so ours is gone.
    except (ProcessLookupError, PermissionError):
        return False
    return True


def signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


class Command(BriefChecks, BaseCommand):
    help = "Serve the site with daphne and run the django-q2 worker beside it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--no-worker", action="store_true", help="serve the site only")

    def handle(self, *args: Any, **options: Any) -> None:
        host, port = options["host"], options["port"]
        # Before any child starts: on missing tables they would fail with a traceback each.
        require_migrated()
        check_reachable_names(host)
        check_port_free(host, port)
        conf = agent_settings()
        warning = startup_warning(
            restrict=conf.restrict_to_workspace, network=conf.exec_network, host_uid=conf.exec_uid
        )
        if warning:
            self.stderr.write(warning)
        commands = {
            "web": [
                sys.executable,
                "-m",
                "agentsite.web",
                # A WebSocket's opening handshake may take this long (daphne's default is
                # 5 s): a burst of a few hundred chats opening at once on a busy process
                # took longer, and a dropped handshake reaches the page as a failed connect.
                "--websocket_connect_timeout",
                str(WEBSOCKET_CONNECT_TIMEOUT),
                "-b",
                host,
                "-p",
                str(port),
                "agentsite.asgi:application",
            ],
        }
        if not options["no_worker"]:
            manage_py = str(settings.BASE_DIR / "manage.py")
            commands["worker"] = [sys.executable, manage_py, "qcluster"]

        stopping = False

        def stop(signum: int, frame: object) -> None:
            nonlocal stopping
            stopping = True

        # Before any child starts, so that a signal during start-up still stops them all.
        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        children: dict[str, subprocess.Popen[bytes]] = {}
        ended: list[str] = []
        try:
            # Own sessions, so a terminal's Ctrl-C reaches only this process, which then
            # stops each child, and every process it started, once and in order.
            for name, command in commands.items():
                children[name] = subprocess.Popen(
                    command, cwd=settings.BASE_DIR, start_new_session=True
                )
            self.stdout.write(f"Serving http://{host}:{port}/ (Ctrl-C stops)")
            while not stopping and not ended:
                ended = [name for name, child in children.items() if child.poll() is not None]
                time.sleep(0.2)
            if ended:
                self.stderr.write(f"{', '.join(ended)} stopped; stopping the rest")
        finally:
            self._stop_all(children)
        if ended:
            sys.exit(1)

    def _stop_all(self, children: dict[str, subprocess.Popen[bytes]]) -> None:
        """Stop each child, then whatever is left of its process group.

        Only a child itself gets SIGTERM at first: the django-q2 cluster stops its own
        processes in order when its main process is told to, but hangs until SIGKILL if
        they are all killed under it at once. Once a child has exited, what is left of its group
        (the worker's processes, after a crash) has nobody to stop it: the group gets
        SIGTERM, and anything still alive after the grace period SIGKILL.
        """
        # Each child leads its own group (start_new_session), so its pid is the group's id.
        groups = {name: child.pid for name, child in children.items()}
        for child in children.values():
            if child.poll() is None:
                child.terminate()
        orphaned: set[str] = set()
        deadline = time.monotonic() + GRACE_SECONDS
        while time.monotonic() < deadline:
            for name, child in children.items():
                # poll() also reaps an ended child, so that its group can empty.
                if child.poll() is not None and name not in orphaned:
                    orphaned.add(name)
                    signal_group(groups[name], signal.SIGTERM)
            if not any(group_alive(pgid) for pgid in groups.values()):
                return
            time.sleep(0.1)
        for name, pgid in groups.items():
            if group_alive(pgid):
                logger.warning("%s did not stop within %d s; killing it", name, GRACE_SECONDS)
                signal_group(pgid, signal.SIGKILL)
        for child in children.values():
            child.wait()
