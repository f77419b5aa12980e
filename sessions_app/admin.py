from __future__ import annotations

from django.contrib import admin
from django.db.models import Count, QuerySet
from django.http import HttpRequest

from sessions_app.models import Message, Run, Session


class MessageInline(admin.TabularInline):
    model = Message
    fields = ("created", "role", "name", "content", "tool_calls", "tool_call_id", "archived")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True
    ordering = ("id",)

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class RunInline(admin.TabularInline):
    model = Run
    fields = ("created", "status", "channel", "model", "iterations", "cost", "error")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    list_display = ("key", "title", "channel", "owner", "model", "message_count", "updated")
    list_filter = ("channel", "owner")
    search_fields = ("key", "title", "owner__username", "messages__content")
    readonly_fields = ("key", "channel", "chat_id", "last_consolidated", "created", "updated")
    fields = (
        "key",
        "channel",
        "chat_id",
        "owner",
        "title",
        "model",
        "last_consolidated",
        "created",
        "updated",
    )
    inlines = (RunInline, MessageInline)
    date_hierarchy = "updated"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # conversations make sessions; a key typed here would name none

    def get_queryset(self, request: HttpRequest) -> QuerySet[Session]:
        return (
            super()
            .get_queryset(request)
            .select_related("owner")
            .annotate(_messages=Count("messages"))
        )

    @admin.display(ordering="_messages", description="messages")
    def message_count(self, obj: Session) -> int:
        return getattr(obj, "_messages", 0)


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ("id", "session", "role", "short_content", "created")
    list_filter = ("role", "session__channel")
    search_fields = ("content", "session__key")
    list_select_related = ("session",)
    readonly_fields = [f.name for f in Message._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    @admin.display(description="content")
    def short_content(self, obj: Message) -> str:
        return (obj.content or "")[:100]


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = (
        "created",
        "session",
        "status",
        "channel",
        "model",
        "iterations",
        "cost",
        "duration",
    )
    list_filter = ("status", "channel", "model")
    search_fields = ("id", "session__key", "prompt", "text", "error")
    list_select_related = ("session",)
    readonly_fields = [f.name for f in Run._meta.fields] + ["duration"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
