"""What the audit log records (django-auditlog): who changed what and when.

Teams and their policies, a person's own policy, their memberships, staff and active flags,
named tokens (never their digest), daily budgets lifted or set, approvals answered. Sign-ins
are recorded as `access` entries of the person who signed in (`record_sign_in`).
"""

from __future__ import annotations

from typing import Any

from auditlog.models import LogEntry
from auditlog.registry import auditlog
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_in


def register() -> None:
    from sessions_app.models import Approval, UserBudget
    from teams_app.models import ApiToken, PersonalPolicy, Team

    auditlog.register(Team, m2m_fields={"admins", "mcp_servers", "skills"})
    auditlog.register(PersonalPolicy)
    auditlog.register(ApiToken, exclude_fields=["digest", "last_used"])
    auditlog.register(
        get_user_model(),
        include_fields=["username", "email", "is_active", "is_staff", "is_superuser"],
        m2m_fields={"groups"},
    )
    auditlog.register(UserBudget)
    auditlog.register(Approval, include_fields=["status", "answered_by", "answered"])
    user_logged_in.connect(record_sign_in, dispatch_uid="teams_app.audit.sign_in")


def record_sign_in(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    backend = getattr(user, "backend", "") or ""
    how = "password"
    if "oidc" in backend:
        how = "identity provider"
    elif "directory" in backend:
        how = "LDAP"
    LogEntry.objects.log_create(
        user,
        force_log=True,
        action=LogEntry.Action.ACCESS,
        changes={"signed in": ["", how]},
        actor=user,
        remote_addr=request.META.get("REMOTE_ADDR") if request is not None else None,
    )
