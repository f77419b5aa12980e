"""Child processes for the benchmarks, none of which may outlive the bench.

Each child leads a session of its own, so a terminal's Ctrl-C reaches only the bench,
which then stops every child and whatever the child started, however the bench ends:
normally, on an error (a start that timed out), on Ctrl-C, or on SIGTERM.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

GRACE_SECONDS = 10
SECRET_KEY = "bench-only-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz"
# The Redis database a bench uses, away from a site's and its tests' (0 by default): group
# names and rate-limit keys there are made of row ids, which another user of the same
# database would share.
BENCH_REDIS_DB = 15


def bench_env(scratch: Path, api_base: str) -> dict[str, str]:
    """This environment without the settings it may hold for a real install (bar the
    database server), plus a scratch install talking to the scripted model at `api_base`."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AGENT_", "DJANGO_", "DATABASE_"))
        # A user's Python caches the bytecode of what it imports at the first run, and
        # every later start reads it: a machine set never to write it would time the
        # compiler at every start instead.
        and key != "PYTHONDONTWRITEBYTECODE"
    }
    if "DATABASE_URL" in os.environ:
        env["DATABASE_URL"] = os.environ["DATABASE_URL"]
    env.update(
        {
            "AGENT_DATA_DIR": str(scratch / "data"),
            "AGENT_WORKSPACE": str(scratch / "workspace"),
            "AGENT_MODEL": "openai/scripted",
            "AGENT_API_BASE": api_base,
            "AGENT_API_KEY": "bench",
            "DJANGO_DEBUG": "false",
            "DJANGO_SECRET_KEY": SECRET_KEY,
        }
    )
    return env


def daphne_argv(port: int) -> list[str]:
    """The command line of a daphne serving the site on 127.0.0.1:`port`, quietly, as
    `manage.py serve` starts it."""
    return [
        sys.executable,
        "-m",
        "daphne",
        "--websocket_connect_timeout",
        "20",  # serve.WEBSOCKET_CONNECT_TIMEOUT, without loading Django here
        "-v",
        "0",
        "-b",
        "127.0.0.1",
        "-p",
        str(port),
        "agentsite.asgi:application",
    ]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    # PermissionError: the id has since gone to another user's group, so ours is gone.
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def tail(path: Path | None, lines: int = 15) -> str:
    if path is None or not path.exists():
        return ""
    text = path.read_text(errors="replace").splitlines()[-lines:]
    return "".join(f"\n    | {line}" for line in text)


class Children:
    """The processes one bench started; `children()` stops them all on the way out."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self._procs: list[subprocess.Popen[bytes]] = []
        self._log_of: dict[int, Path] = {}

    def start(
        self, command: Sequence[str], *, name: str, stdout: Any = None, **kwargs: Any
    ) -> subprocess.Popen[bytes]:
        """Start `command` with its standard error (and output, unless given) in a log
        file named after `name`, which `failure` quotes when the child misbehaves."""
        self.logs.mkdir(parents=True, exist_ok=True)
        log = self.logs / f"{name}.log"
        with log.open("ab") as sink:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=sink if stdout is None else stdout,
                stderr=sink,
                start_new_session=True,
                **kwargs,
            )
        self._procs.append(proc)
        self._log_of[proc.pid] = log
        return proc

    def run(self, command: Sequence[str], *, name: str, timeout: float = 120, **kwargs: Any) -> str:
        """Run `command` to its end and return its standard output; raise if it fails."""
        proc = self.start(command, name=name, stdout=subprocess.PIPE, **kwargs)
        out, _ = proc.communicate(timeout=timeout)
        self.stop(proc)
        if proc.returncode:
            raise RuntimeError(self.failure(proc, f"{name} exited with {proc.returncode}"))
        return out.decode()

    def wait4(self, proc: subprocess.Popen[bytes]) -> tuple[int, os.struct_rusage]:
        """Reap `proc` for its resource usage (`ru_maxrss`: the peak RSS of it or of the
        largest child it reaped, KiB on Linux). Popen learns the exit code too, so that it
        neither waits for nor signals a pid that may belong to someone else by then. The
        caller still `stop`s it, for whatever it left running."""
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        return proc.returncode, usage

    def failure(self, proc: subprocess.Popen[bytes], message: str) -> str:
        return message + tail(self._log_of.get(proc.pid))

    def wait_for_port(self, port: int, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
        """Wait until `proc` listens on `port`; fail at once if it exits first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(
                    self.failure(proc, f"{proc.args!r} exited with {proc.returncode} at start")
                )
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError(self.failure(proc, f"nothing listens on port {port} after {timeout} s"))

    def stop(self, proc: subprocess.Popen[bytes]) -> None:
        """Stop one child and everything it started, before the bench goes on."""
        self._stop([proc])
        self._procs.remove(proc)

    def stop_all(self) -> None:
        self._stop(self._procs)
        self._procs.clear()

    @staticmethod
    def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
        """SIGTERM to each child alone first: a django-q2 cluster stops its own processes
        in order when told to, but hangs when they are all signalled at once. Once a child
        has ended, the rest of its group has nobody to stop it, so the group gets SIGTERM;
        SIGKILL for whatever is left after the grace period."""
        # Each child leads its own group (start_new_session), so its pid is the group's id.
        for proc in procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.terminate()
        signalled: set[int] = set()
        deadline = time.monotonic() + GRACE_SECONDS
        while time.monotonic() < deadline:
            for proc in procs:
                # poll() reaps an ended child, so that its group can empty.
                if proc.poll() is not None and proc.pid not in signalled:
                    signalled.add(proc.pid)
                    _signal_group(proc.pid, signal.SIGTERM)
            if not any(_group_alive(proc.pid) for proc in procs):
                break
            time.sleep(0.05)
        for proc in procs:
            if _group_alive(proc.pid):
                _signal_group(proc.pid, signal.SIGKILL)
        for proc in procs:
            proc.wait()


@contextlib.contextmanager
def children(logs: Path) -> Iterator[Children]:
    """Yield a `Children`; on the way out, however it comes, stop every child.

    SIGTERM to the bench is turned into KeyboardInterrupt meanwhile, so that it too
    ends in the clean-up rather than leaving the children behind; during the clean-up
    Ctrl-C is ignored, so that an impatient second one does not cut it short.
    """
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    group = Children(logs)
    try:
        yield group
    finally:
        interrupt = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            group.stop_all()
        finally:
            signal.signal(signal.SIGINT, interrupt)
            signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def scratch_services() -> Iterator[None]:
    """Point DATABASE_URL and REDIS_URL, when set, at stores of the bench's own for the
    while: a PostgreSQL database made for this run next to the one named (and dropped after
    it, the only thing the bench ever drops) and Redis database BENCH_REDIS_DB. A bench
    then never writes into a site's data, nor into what someone's tests use beside it."""
    saved = {key: os.environ.get(key) for key in ("DATABASE_URL", "REDIS_URL")}
    redis = saved["REDIS_URL"]
    if redis and redis.startswith(("redis://", "rediss://")):
        os.environ["REDIS_URL"] = _with_path(redis, f"/{BENCH_REDIS_DB}")
    server = saved["DATABASE_URL"] or ""
    scratch = ""
    if server.startswith(("postgres://", "postgresql://", "pgsql://")):
        scratch = f"agentsite_bench_{os.getpid()}_{secrets.token_hex(4)}"
        _postgres(server, f'CREATE DATABASE "{scratch}"')
        os.environ["DATABASE_URL"] = _with_path(server, f"/{scratch}")
    try:
        yield
    finally:
        if scratch:
            # FORCE: a connection of this process (Django's) may still be open on it.
            _postgres(server, f'DROP DATABASE IF EXISTS "{scratch}" WITH (FORCE)')
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _with_path(url: str, path: str) -> str:
    return urllib.parse.urlsplit(url)._replace(path=path).geturl()


def _postgres(url: str, statement: str) -> None:
    import psycopg

    # psycopg takes postgresql:// and postgres://; dj-database-url's pgsql:// is neither.
    dsn = url.replace("pgsql://", "postgresql://", 1)
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(statement.encode())


def cpu_seconds(pid: int) -> float:
    """CPU time (user and system) the process has used so far, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
