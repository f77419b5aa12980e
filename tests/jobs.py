"""Test helpers for background work: the worker's queue held in the test's hands, a real
django-q2 cluster, and a session's group on the channel layer heard from outside."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import connections
from django.utils.module_loading import import_string

from agent.turn import session_group
from tests.conftest import ROOT


@dataclass
class HeldQueue:
    """What the code queued for django-q2's worker, in order, not yet run. `run_all` runs
    the jobs as the worker would (each in its own thread, which holds no event loop)."""

    jobs: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = field(default_factory=list)

    def add(self, func: str, *args: Any, **kwargs: Any) -> str:
        self.jobs.append((func, args, kwargs))
        return f"held-{len(self.jobs)}"

    def names(self) -> list[str]:
        return [func.rsplit(".", 1)[-1] for func, _, _ in self.jobs]

    async def run_all(self) -> list[Any]:
        results = []
        while self.jobs:
            func, args, kwargs = self.jobs.pop(0)
            kwargs = {k: v for k, v in kwargs.items() if k not in ("task_name", "q_options")}
            results.append(await as_worker(import_string(func))(*args, **kwargs))
        return results


def as_worker(func: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    """`func` run as a worker runs it: in a thread of its own (which holds no event loop),
    closing its database connection afterwards, as django-q2 does after a task."""

    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        finally:
            connections.close_all()

    return sync_to_async(run, thread_sensitive=False)


def hold_queue(monkeypatch: pytest.MonkeyPatch) -> HeldQueue:
    queue = HeldQueue()
    monkeypatch.setattr("django_q.tasks.async_task", queue.add)
    return queue


class GroupListener:
    """Hears what a session's open sockets would be sent through the channel layer."""

    def __init__(self, session_id: int) -> None:
        self.session_id = session_id
        self.layer = get_channel_layer()
        self.channel = ""

    async def __aenter__(self) -> GroupListener:
        self.channel = await self.layer.new_channel()
        await self.layer.group_add(session_group(self.session_id), self.channel)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.layer.group_discard(session_group(self.session_id), self.channel)

    async def frames(self, *, until: str, timeout: float = 10) -> list[dict[str, Any]]:
        """Frames up to and including the first of type `until`."""
        seen: list[dict[str, Any]] = []
        async with asyncio.timeout(timeout):
            while not seen or seen[-1]["type"] != until:
                message = await self.layer.receive(self.channel)
                if "frame" in message:
                    seen.append(message["frame"])
        return seen


@contextmanager
def cluster(env: dict[str, str], *, graceful: bool = True) -> Iterator[subprocess.Popen[bytes]]:
    """A django-q2 cluster (`manage.py qcluster`) in a process group of its own, so that a
    test can kill all of it at once (`kill`), as the kernel's OOM killer or a lost host
    would. Stopped at the end, or killed when not `graceful`: a graceful stop takes a
    second, wasted when nothing the test checks is left for the cluster to do."""
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"], cwd=ROOT, env=env, start_new_session=True
    )
    try:
        yield worker
    finally:
        if worker.poll() is None:
            if graceful:
                worker.terminate()
                worker.wait(timeout=30)
            else:
                kill(worker)


def kill(worker: subprocess.Popen[bytes]) -> None:
    os.killpg(worker.pid, signal.SIGKILL)
    worker.wait()
