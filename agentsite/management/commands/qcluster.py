"""`manage.py qcluster`: django-q2's worker, refusing with one line on an unmigrated database.

Without the check, each of its processes would log a traceback every time it looked for
work in the missing tables, and go on doing so.
"""

from typing import Any

from django.db import connections
from django_q.management.commands.qcluster import Command as ClusterCommand

from agent.conf import agent_settings
from agent.llm.client import needs_litellm
from agent.llm.litellm_adapter import load
from agentsite.database import require_migrated


class Command(ClusterCommand):
    def handle(self, *args: Any, **options: Any) -> None:
        require_migrated()
        conf = agent_settings()
        if conf.model and needs_litellm(conf.model, conf.llm_backend):
            # Seconds of import, paid once here before the workers fork and inherit it,
            # rather than by each worker's first task.
            load()
        # The cluster forks its workers: none of them may inherit this connection.
        connections.close_all()
        super().handle(*args, **options)
