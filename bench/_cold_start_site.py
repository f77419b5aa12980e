"""What every part of bench/cold_start.py shares: the scratch site it measures, and how it
takes and judges a median.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench._procs import Children, bench_env, daphne_argv, free_port

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


def median(values: list[float]) -> float:
    return statistics.median(values)


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


@dataclass
class Site:
    """A scratch install with a login, and the scripted model in its own process."""

    procs: Children
    scratch: Path
    env: dict[str, str]
    api_base: str
    token: str = ""

    @classmethod
    def start(cls, procs: Children, scratch: Path) -> Site:
        llm_port = free_port()
        api_base = f"http://127.0.0.1:{llm_port}/v1"
        env = bench_env(scratch, api_base)
        env.update(
            {
                "DJANGO_SUPERUSER_USERNAME": "bench",
                "DJANGO_SUPERUSER_PASSWORD": "bench-password-1",
                # Every part's turns count against one user's limit; the bench is no abuse.
                "AGENT_TURN_RATE": "100000/min",
                # One worker process: with two, the second task may land on the other,
                # just as cold, and there would be no warm one to compare with.
                "AGENT_WORKERS": "1",
            }
        )
        llm = procs.start(
            [PYTHON, "-m", "tests.llm_server", "--port", str(llm_port)],
            name="llm_server",
            cwd=ROOT,
            env=env,
        )
        site = cls(procs, scratch, env, api_base)
        site.manage("migrate", "-v0")
        site.manage("ensure_login")
        site.token = site.manage("drf_create_token", "bench").split()[2]
        procs.wait_for_port(llm_port, llm)
        return site

    def manage(self, *command: str, name: str = "") -> str:
        return self.procs.run(
            [PYTHON, "manage.py", *command],
            name=name or f"manage-{command[0]}",
            cwd=ROOT,
            env=self.env,
        )

    def daphne(self, name: str) -> tuple[subprocess.Popen[bytes], int, float]:
        """Start a fresh daphne; return it, its port and the seconds until it listened."""
        port = free_port()
        started = time.perf_counter()
        proc = self.procs.start(
            daphne_argv(port),
            name=name,
            cwd=ROOT,
            env=self.env,
        )
        self.procs.wait_for_port(port, proc)
        return proc, port, time.perf_counter() - started
