from __future__ import annotations

from django.contrib import admin

from skills_app.models import Skill


@admin.register(Skill)
class SkillAdmin(admin.ModelAdmin):
    list_display = ("name", "description", "always", "enabled", "updated")
    list_filter = ("always", "enabled")
    list_editable = ("always", "enabled")
    search_fields = ("name", "description")
    readonly_fields = ("created", "updated")
