"""`manage.py qcluster`: django-q2's worker, refusing with one line on an unmigrated database,
with the cron dispatcher (`cron_app.dispatch`) beside it.

Without the check, each of its processes would log a traceback every time it looked for
work in the missing tables, and go on doing so.
"""

import logging
import os
from typing import Any

from django.conf import settings
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
        # django-q2's own handle, as of 1.11 (the secret key's check, since signing needs
        # it; --name; the cluster), but keeping hold of the cluster, to dispatch while it
        # runs: its handle does not hand it back.
        settings.SECRET_KEY  # noqa: B018
        if options.get("cluster_name"):
            os.environ["Q_CLUSTER_NAME"] = options["cluster_name"]
        cluster = Cluster()
        cluster.start()
        # In this process, once the cluster has forked what it runs, so that nothing the
        # dispatcher opens is inherited; until a signal stops the cluster (its handler
        # runs here and joins it) or it dies.
        sentinel = cluster.sentinel
        if sentinel is not None:
            Dispatcher().run(stopped=lambda: not sentinel.is_alive())
        connections.close_all()
