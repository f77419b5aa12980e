"""The agent's parts of the admin of users: each user's own prompt files
(`agent.doors.admin_prompt_files`), reached from there, and their daily budget, on their
page. This app comes last in INSTALLED_APPS, so the users' admin as registered by then is
the one extended. The worker's finished jobs (django-q2's) say how long each took in words."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django_q.admin import TaskAdmin
from django_q.models import Success

from agent.doors.admin_prompt_files import with_prompt_files
from agent.turn import known_tool_names
from sessions_app.admin_usage import UserBudgetInline
from sessions_app.durations import between
from teams_app.admin_forms import use_tool_names

_User = get_user_model()
if admin.site.is_registered(_User):
    _base = type(admin.site.get_model_admin(_User))
    admin.site.unregister(_User)
    _users = with_prompt_files(_base)
    _users.inlines = [*_users.inlines, UserBudgetInline]
    admin.site.register(_User, _users)

# The teams' and people's policies offer the site's tools to tick: the turn package knows
# them, and lies above the data app whose forms they are.
use_tool_names(known_tool_names)


class _TimedTaskAdmin(TaskAdmin):
    @admin.display(description="time taken")
    def time_taken(self, obj: Any) -> str | None:
        return between(obj.started, obj.stopped)


if admin.site.is_registered(Success):
    admin.site.unregister(Success)
    admin.site.register(Success, _TimedTaskAdmin)
