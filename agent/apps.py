from django.apps import AppConfig, apps
from django.db.models.signals import post_delete, post_migrate


class AgentConfig(AppConfig):
    name = "agent"
    verbose_name = "Agent"

    def ready(self) -> None:
        from agent.fanout import on_session_deleted
        from agent.jobs import ensure_schedules
        from sessions_app.models import Session

        post_delete.connect(on_session_deleted, sender=Session, dispatch_uid="agent.session_closed")
        # After django-q2's tables (the schedules live there); Django sends post_migrate
        # only for apps with models, which this one has none of.
        django_q = apps.get_app_config("django_q")
        post_migrate.connect(ensure_schedules, sender=django_q, dispatch_uid="agent.schedules")
