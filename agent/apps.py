from django.apps import AppConfig
from django.db.models.signals import post_delete


class AgentConfig(AppConfig):
    name = "agent"
    verbose_name = "Agent"

    def ready(self) -> None:
        from agent.fanout import on_session_deleted
        from sessions_app.models import Session

        post_delete.connect(on_session_deleted, sender=Session, dispatch_uid="agent.session_closed")
