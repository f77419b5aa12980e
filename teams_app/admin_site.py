"""Who may enter the admin: staff, as Django has it, and the admins of a team, who are not
staff and see only their teams there (`teams_app.admin.TeamAdmin`). Every other section
asks for Django's model permissions, which a team admin has none of, so it is neither
listed nor opened for them."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError
from django.http import HttpRequest

from teams_app.models import Team


def administers_a_team(user: Any) -> bool:
    if not (user is not None and user.is_authenticated and user.is_active):
        return False
    return Team.objects.filter(admins=user).exists()


def may_use_admin(request: HttpRequest) -> bool:
    """AdminSite.has_permission: an active staff member, or an active team admin."""
    user = getattr(request, "user", None)
    if user is None or not user.is_active:
        return False
    if user.is_staff:
        return True
    # Asked once per request: every admin page and its context ask again.
    known = getattr(request, "_administers_a_team", None)
    if known is None:
        known = administers_a_team(user)
        request._administers_a_team = known  # type: ignore[attr-defined]
    return bool(known)


class StaffOrTeamAdminLoginForm(AdminAuthenticationForm):
    """The admin's sign-in, open to team admins as well as to staff."""

    def confirm_login_allowed(self, user: Any) -> None:
        AuthenticationForm.confirm_login_allowed(self, user)
        if not (user.is_staff or administers_a_team(user)):
            raise ValidationError(
                self.error_messages["invalid_login"],
                code="invalid_login",
                params={"username": self.username_field.verbose_name},
            )


def open_to_team_admins(site: admin.AdminSite) -> None:
    site.has_permission = may_use_admin  # type: ignore[method-assign]
    site.login_form = StaffOrTeamAdminLoginForm
