"""The admin's page of shared chats: who shared what with whom, and the snapshot as it was
shared, read-only. Staff may change who reads a share or delete it; nobody writes a
snapshot here (a share is made from its chat)."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from sessions_app.admin_links import clipped, when
from sessions_app.models import ChatShare

# Each message of the snapshot is shown this long at most; the API has it whole.
SHOWN_CHARS = 300


@admin.register(ChatShare)
class ChatShareAdmin(admin.ModelAdmin):
    list_display = ("short_title", "owner", "readers", "message_count", "shared")
    list_filter = ("teams",)
    search_fields = ("id", "title", "owner__username", "people__username")
    list_select_related = ("owner",)
    filter_horizontal = ("teams", "people")
    fields = (
        "id",
        "page",
        "owner",
        "source",
        "title",
        "teams",
        "people",
        "created",
        "snapshot",
    )
    readonly_fields = ("id", "page", "owner", "source", "title", "created", "snapshot")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # a share is a snapshot of a chat, made from the chat

    def get_queryset(self, request: HttpRequest) -> QuerySet[ChatShare]:
        return super().get_queryset(request).prefetch_related("teams", "people")

    @admin.display(ordering="title", description="title")
    def short_title(self, obj: ChatShare) -> str:
        return clipped(obj.title or "(untitled)", 48)

    @admin.display(ordering="created", description="shared")
    def shared(self, obj: ChatShare) -> str:
        return when(obj.created)

    @admin.display(description="shared with")
    def readers(self, obj: ChatShare) -> str:
        names = [f"team {group.name}" for group in obj.teams.all()]
        names += [user.get_username() for user in obj.people.all()]
        return clipped(", ".join(names), 60)

    @admin.display(description="messages")
    def message_count(self, obj: ChatShare) -> int:
        return len(obj.messages or [])

    @admin.display(description="page")
    def page(self, obj: ChatShare) -> str:
        url = reverse("shared-chat", args=[obj.pk])
        return format_html('<a href="{}">{}</a>', url, url)

    @admin.display(description="snapshot")
    def snapshot(self, obj: ChatShare) -> str:
        lines = []
        for message in obj.messages or []:
            text = message.get("content") or ""
            calls = [
                (call.get("function") or {}).get("name") or "tool"
                for call in message.get("tool_calls") or []
            ]
            if calls:
                text = f"{text} [calls {', '.join(calls)}]".strip()
            if len(text) > SHOWN_CHARS:
                text = text[:SHOWN_CHARS] + "…"
            lines.append((message.get("role") or "?", text))
        if not lines:
            return "—"
        items = format_html_join("", "<li><strong>{}</strong>: {}</li>", lines)
        return format_html('<ol class="shared-snapshot">{}</ol>', items)
