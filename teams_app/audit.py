"""What the audit log records (django-auditlog): who changed what and when.

Teams and their policies, a person's own policy, their memberships, staff and active flags,
named tokens (never their digest), daily budgets lifted or set, approvals answered. Sign-ins
are recorded as `access` entries of the person who signed in (`record_sign_in`).

Memberships are recorded here rather than by django-auditlog's own m2m handling: that one
logs a change made from the group's side (`group.user_set.add`, as the admin and the
sign-in sync do) against the group, a model it does not follow, with the field named
`groups` and the people as its objects. Each change is recorded on the person instead,
whichever side made it, as `groups: add/delete [group names]`.
"""

from __future__ import annotations

from typing import Any

from auditlog.context import auditlog_disabled
from auditlog.models import LogEntry
from auditlog.registry import auditlog
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.signals import user_logged_in
from django.db.models.signals import m2m_changed

# The people a `clear()` is about to take out of a group (or the groups out of a person),
# kept from its pre_clear to its post_clear, which is told no names.
_CLEARING = "_audit_clearing"


def register() -> None:
    from sessions_app.models import Approval, UserBudget
    from teams_app.models import ApiToken, PersonalPolicy, Team

    auditlog.register(Team, m2m_fields={"admins", "mcp_servers", "skills"})
    auditlog.register(PersonalPolicy)
    auditlog.register(ApiToken, exclude_fields=["digest", "last_used"])
    user = get_user_model()
    auditlog.register(
        user, include_fields=["username", "email", "is_active", "is_staff", "is_superuser"]
    )
    m2m_changed.connect(
        record_membership, sender=user.groups.through, dispatch_uid="teams_app.audit.groups"
    )
    auditlog.register(UserBudget)
    auditlog.register(Approval, include_fields=["status", "answered_by", "answered"])
    user_logged_in.connect(record_sign_in, dispatch_uid="teams_app.audit.sign_in")


def record_membership(
    sender: Any,
    instance: Any,
    action: str,
    reverse: bool,
    model: Any,
    pk_set: set[Any] | None,
    **kwargs: Any,
) -> None:
    """A change of `User.groups` from either side, recorded on each person it changed."""
    if auditlog_disabled.get():
        return
    if action == "pre_clear":
        # `reverse`: the group's side (`group.user_set.clear()`), so the people are `model`.
        related = instance.user_set.all() if reverse else instance.groups.all()
        setattr(instance, _CLEARING, set(related.values_list("pk", flat=True)))
        return
    if action not in ("post_add", "post_remove", "post_clear"):
        return
    pks = pk_set if action != "post_clear" else instance.__dict__.pop(_CLEARING, set())
    if not pks:
        return
    operation = "add" if action == "post_add" else "delete"
    if reverse:
        # One group, several people: an entry for each.
        group = Group.objects.filter(pk=instance.pk)
        for person in get_user_model()._default_manager.filter(pk__in=pks):
            LogEntry.objects.log_m2m_changes(group, person, operation, "groups")
    else:
        groups = Group.objects.filter(pk__in=pks).order_by("name")
        LogEntry.objects.log_m2m_changes(groups, instance, operation, "groups")


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
