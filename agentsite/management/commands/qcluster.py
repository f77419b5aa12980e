"""`manage.py qcluster`: django-q2's worker, with the cron dispatcher (`cron_app.dispatch`)
beside it, which also lets the tool calls that waited for a person past their time count as
declined and queues their turns to go on (`settle_approvals`).

Before it starts: one line, not a traceback, on an unmigrated database (each of its processes
would otherwise log one every time it looked for work in the missing tables) or on settings
that would fail every task (`agent.checks`); then the schedules that settings shape are put
as they say (`ensure_schedules`), so that a changed heartbeat interval counts from this start.
SIGTERM or Ctrl-C stops it within seconds, handing back what it could not finish
(`agent.doors.cluster`).
"""

import logging
import os
import signal
import time
from typing import Any

from django.conf import settings
from django.db import connections
from django_q.management.commands import qcluster

from agent import turn
from agent.checks import BriefChecks
from agent.conf import agent_settings
from agent.doors import cluster as graceful
from agent.job_functions import ensure_schedules, fail_dead_runs, settle_approvals
from agent.llm.client import needs_litellm
from agent.llm.litellm_adapter import load
from agentsite.database import require_migrated
from cron_app.dispatch import Dispatcher

logger = logging.getLogger(__name__)


class Command(BriefChecks, qcluster.Command):
    def handle(self, *args: Any, **options: Any) -> None:
        signalled: list[float] = []

        def on_early_signal(signum: int, frame: object) -> None:
            # A stop asked for while it readies (seconds, with litellm to load) ends it there,
            # cleanly, rather than killing it by the signal's default.
            if not signalled:
                signalled.append(time.monotonic())

        if not options.get("run_once"):
            signal.signal(signal.SIGTERM, on_early_signal)
            signal.signal(signal.SIGINT, on_early_signal)
        require_migrated()
        ensure_schedules()
        # Loaded once here, before the cluster forks its workers: each inherits the turn
        # package rather than loading it at its first job.
        turn.load()
        conf = agent_settings()
        if conf.model and needs_litellm(conf.model, conf.llm_backend):
            # Seconds of import, paid once here before the workers fork and inherit it,
            # rather than by each worker's first task.
            load()
        # The cluster forks its workers: none of them may inherit this connection.
        connections.close_all()
        if options.get("run_once"):
            super().handle(*args, **options)
            return
        # django-q2's own handle, as of 1.11 (the secret key's check, since signing needs
        # it; --name; the cluster), but keeping hold of the cluster, to dispatch while it
        # runs and to stop it in time: its handle does neither.
        settings.SECRET_KEY  # noqa: B018
        if signalled:
            logger.info("stopped before the cluster started")
            return
        if options.get("cluster_name"):
            os.environ["Q_CLUSTER_NAME"] = options["cluster_name"]
        stopping = graceful.prepare()
        cluster = graceful.GracefulCluster()

        def on_signal(signum: int, frame: object) -> None:
            # Only flags: django-q2's own handler waits here, in the signal handler, for the
            # whole cluster, and the dispatcher with it.
            if not signalled:
                signalled.append(time.monotonic())
            graceful.request_stop(cluster, stopping)

        # After the cluster's constructor, which installs django-q2's handler.
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        cluster.start()
        if signalled:  # during the start, before it had a stop event to set
            graceful.request_stop(cluster, stopping)
        # In this process, once the cluster has forked what it runs, so that nothing the
        # dispatcher opens is inherited; until a signal or the cluster's end.
        sentinel = cluster.sentinel
        if sentinel is not None:
            # Beside the cron jobs, the calls that waited for a person past their time; the
            # sockets hear of those as they hear of the workers' events.
            turn.write_through_database()
            dispatcher = Dispatcher(chores=[settle_approvals])
            dispatcher.run(stopped=lambda: bool(signalled) or not sentinel.is_alive())
        handed_back = graceful.stop(
            cluster, stopping, signalled=signalled[0] if signalled else time.monotonic()
        )
        if handed_back:
            # The turns the workers could not finish end now, plainly, for whoever waits.
            try:
                fail_dead_runs()
            except Exception:
                logger.exception("could not end the turns handed back; the next sweep will")
        connections.close_all()
