"""The agent's pages in the admin: each user's own prompt files (`agent.doors.admin_prompt_files`),
reached from the admin of users. This app comes last in INSTALLED_APPS, so the users'
admin as registered by then is the one extended."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import get_user_model

from agent.doors.admin_prompt_files import with_prompt_files

_User = get_user_model()
if admin.site.is_registered(_User):
    _base = type(admin.site.get_model_admin(_User))
    admin.site.unregister(_User)
    admin.site.register(_User, with_prompt_files(_base))
