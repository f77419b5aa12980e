from typing import Any

from django.apps import AppConfig, apps
from django.contrib.auth.signals import user_logged_out
from django.core import checks
from django.db.models.signals import (
    m2m_changed,
    post_delete,
    post_migrate,
    post_save,
    pre_save,
)


def _ensure_schedules(**kwargs: Any) -> None:
    # The job functions' module brings the worker's needs with it (the cron dispatcher, the
    # schedules): only `migrate` needs them, not every process that starts Django.
    from agent.job_functions import ensure_schedules

    ensure_schedules(**kwargs)


def _relay_from_worker(**kwargs: Any) -> None:
    # django-q2 runs a task in this process: a worker's, unless tasks run inline (its sync
    # option), in the process that queued them and whose layer is the sockets' own.
    from django_q.conf import Conf

    if not Conf.SYNC:
        from agent.turn import write_through_database

        write_through_database()


class AgentConfig(AppConfig):
    name = "agent"
    verbose_name = "Agent"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model

        from agent import accounts
        from agent.checks import check_approvals, check_exec, check_hooks, check_otel, check_tools
        from agent.turn import on_session_deleted
        from sessions_app.models import Session

        post_delete.connect(on_session_deleted, sender=Session, dispatch_uid="agent.session_closed")
        user = get_user_model()
        pre_save.connect(accounts.note_old_username, sender=user, dispatch_uid="agent.user_name")
        post_save.connect(accounts.follow_rename, sender=user, dispatch_uid="agent.user_renamed")
        post_delete.connect(accounts.retire_folder, sender=user, dispatch_uid="agent.user_deleted")
        from django.contrib.auth.models import Group

        post_delete.connect(
            accounts.retire_team_folder, sender=Group, dispatch_uid="agent.team_deleted"
        )
        # What let a socket in holds only as long as the account, the token and the login do.
        from rest_framework.authtoken.models import Token

        post_save.connect(accounts.end_access, sender=user, dispatch_uid="agent.user_access")
        post_delete.connect(accounts.forget_access, sender=user, dispatch_uid="agent.user_gone")
        post_delete.connect(accounts.end_token, sender=Token, dispatch_uid="agent.token_deleted")
        from teams_app.models import ApiToken

        post_delete.connect(
            accounts.end_token, sender=ApiToken, dispatch_uid="agent.api_token_deleted"
        )
        user_logged_out.connect(accounts.end_login, dispatch_uid="agent.logged_out")
        m2m_changed.connect(
            accounts.follow_membership,
            sender=user.groups.through,
            dispatch_uid="agent.membership",
        )
        # After django-q2's tables (the schedules live there); Django sends post_migrate
        # only for apps with models, which this one has none of.
        django_q = apps.get_app_config("django_q")
        post_migrate.connect(_ensure_schedules, sender=django_q, dispatch_uid="agent.schedules")
        # A tool or a hook that cannot load stops the site at start-up, not at its first turn.
        checks.register(check_tools)
        checks.register(check_hooks)
        checks.register(check_otel)
        checks.register(check_approvals)
        checks.register(check_exec)
        from django_q.signals import pre_execute

        pre_execute.connect(_relay_from_worker, dispatch_uid="agent.relay_from_worker")
