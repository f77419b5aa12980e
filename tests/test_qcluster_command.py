"""`manage.py qcluster` starts its cluster as django-q2's own command does (its name from
`--name`), and runs the cron dispatcher beside it. (The cluster itself runs in the tests of
background work: `tests.jobs.worker_cluster`.)"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.core.management import call_command
from django_q.cluster import Cluster

from agentsite.management.commands import qcluster

pytestmark = pytest.mark.django_db


class Ended:
    """A sentinel process that has stopped, as a cluster's is once a signal stopped it."""

    exitcode = 0

    def is_alive(self) -> bool:
        return False


@pytest.fixture(autouse=True)
def signals_kept() -> Iterator[None]:
    """A cluster takes SIGTERM and SIGINT for itself: pytest's are put back."""
    kept = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}
    yield
    for number, handler in kept.items():
        signal.signal(number, handler)


def test_the_command_starts_a_cluster_and_dispatches_beside_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started: list[Cluster] = []
    dispatched: list[bool] = []

    def start(cluster: Cluster) -> int:  # no processes forked: one already stopped
        cluster.sentinel = Ended()  # type: ignore[assignment]
        started.append(cluster)
        return cluster.pid

    def run(self: Any, *, stopped: Callable[[], bool]) -> None:
        dispatched.append(stopped())

    monkeypatch.setattr(Cluster, "start", start)
    monkeypatch.setattr(qcluster.Dispatcher, "run", run)
    # Set here so that it is put back (removed) after the test, which sets it by --name.
    monkeypatch.setitem(os.environ, "Q_CLUSTER_NAME", "")

    call_command("qcluster", "--name", "cron-test")

    assert os.environ["Q_CLUSTER_NAME"] == "cron-test"
    assert len(started) == 1 and started[0].sentinel.is_alive() is False
    assert dispatched == [True]  # run beside that cluster, which it sees has stopped
