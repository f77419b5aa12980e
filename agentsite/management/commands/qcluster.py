"""`manage.py qcluster`: django-q2's worker, refusing with one line on an unmigrated database,
with the cron dispatcher (`cron_app.dispatch`) beside it.

Without the check, each of its processes would log a traceback every time it looked for
work in the missing tables, and go on doing so.
"""

import logging
from typing import Any
from unittest import mock

from django.db import connections
from django_q.cluster import Cluster
from django_q.management.commands import qcluster

from agent.conf import agent_settings
from agent.llm.client import needs_litellm
from agent.llm.litellm_adapter import load
from agentsite.database import require_migrated
from cron_app.dispatch import Dispatcher

logger = logging.getLogger(__name__)


class Command(qcluster.Command):
    def handle(self, *args: Any, **options: Any) -> None:
        require_migrated()
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
        # django-q2's own handle (its checks, its options) makes and starts the cluster but
        # does not hand it back; as of django-q2 1.11 it makes it by its module's name
        # `Cluster`, which is swapped for a class that keeps hold of it, to dispatch while
        # it runs. Reused, not copied, so that a newer django-q2's handle is the one run.
        made: list[Cluster] = []

        class Kept(Cluster):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                made.append(self)

        with mock.patch.object(qcluster, "Cluster", Kept):
            super().handle(*args, **options)
        if not made:
            # A django-q2 that makes its cluster otherwise: its workers run (and their sweep
            # starts overdue jobs), but jobs start late until this command follows it.
            logger.error(
                "django-q2's qcluster made no cluster this command could see: "
                "no cron dispatcher runs beside it"
            )
            return
        # In this process, once the cluster has forked what it runs, so that nothing the
        # dispatcher opens is inherited; until a signal stops the cluster (its handler
        # runs here and joins it) or it dies.
        sentinel = made[0].sentinel
        if sentinel is not None:
            Dispatcher().run(stopped=lambda: not sentinel.is_alive())
        connections.close_all()
