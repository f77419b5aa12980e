"""The agent's parts of the admin of users: each user's own prompt files
(`agent.doors.admin_prompt_files`), reached from there, and their daily budget, on their
page. This app comes last in INSTALLED_APPS, so the users' admin as registered by then is
the one extended."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import get_user_model

from agent.doors.admin_prompt_files import with_prompt_files
from sessions_app.admin import UserBudgetInline

_User = get_user_model()
if admin.site.is_registered(_User):
    _base = type(admin.site.get_model_admin(_User))
    admin.site.unregister(_User)
    _users = with_prompt_files(_base)
    _users.inlines = [*_users.inlines, UserBudgetInline]
    admin.site.register(_User, _users)
