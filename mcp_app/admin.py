"""MCP servers in the admin. The values in `env` and `headers` are secrets: the form shows
each name with `MASK` for its value, and `MASK` sent back keeps the stored value, so that
editing any other field neither reveals nor wipes a secret. A view-only page shows the
names alone."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest

from mcp_app import services
from mcp_app.masking import MASK, masked, unmask
from mcp_app.models import McpServer

STDIO = ("command", "args", "env")
HTTP = ("url", "headers", "trusted")


class McpServerForm(forms.ModelForm):
    class Meta:
        model = McpServer
        fields = ("name", "transport", "enabled", "tool_timeout", *STDIO, *HTTP)
        help_texts = {
            "env": f'stdio: environment variables for it, e.g. {{"API_KEY": "…"}}; the '
            f"server's own are not passed on. {MASK} keeps a stored value.",
            "headers": f'http: headers sent with every request, e.g. {{"Authorization": '
            f'"Bearer …"}}. {MASK} keeps a stored value.',
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # What the page shows; the stored values stay on `self.instance` until saved.
        for name in ("env", "headers"):
            self.initial[name] = masked(self.initial.get(name, {}))

    def clean_env(self) -> Any:
        return self._unmasked("env", ignore_case=False)

    def clean_headers(self) -> Any:
        return self._unmasked("headers", ignore_case=True)

    def _unmasked(self, name: str, *, ignore_case: bool) -> Any:
        return unmask(
            self.cleaned_data[name], getattr(self.instance, name), ignore_case=ignore_case
        )


@admin.register(McpServer)
class McpServerAdmin(admin.ModelAdmin):
    form = McpServerForm
    list_display = ("name", "transport", "target", "enabled", "trusted", "tool_timeout", "updated")
    list_filter = ("transport", "enabled", "trusted")
    search_fields = ("name", "command", "url")
    readonly_fields = ("created", "updated")
    fieldsets = (
        (None, {"fields": ("name", "transport", "enabled", "tool_timeout")}),
        ("stdio", {"fields": STDIO}),
        ("Streamable HTTP", {"fields": HTTP}),
        (None, {"fields": ("created", "updated")}),
    )
    actions = ("enable", "disable")

    @admin.display(description="command or URL")
    def target(self, obj: McpServer) -> str:
        return obj.command if obj.transport == McpServer.Transport.STDIO else obj.url

    @admin.display(description="env")
    def env_names(self, obj: McpServer) -> str:
        return ", ".join(sorted(masked(obj.env))) or "-"

    @admin.display(description="headers")
    def header_names(self, obj: McpServer) -> str:
        return ", ".join(sorted(masked(obj.headers))) or "-"

    def get_fieldsets(self, request: HttpRequest, obj: McpServer | None = None) -> Any:
        if obj is None or self.has_change_permission(request, obj):
            return self.fieldsets
        # A view-only page renders every field read-only from the stored value: show the
        # secrets' names instead.
        names = {"env": "env_names", "headers": "header_names"}
        fieldsets = []
        for title, options in self.fieldsets:
            fields = [names.get(str(f), f) for f in options["fields"]]
            fieldsets.append((title, {**options, "fields": fields}))
        return fieldsets

    @admin.action(description="Enable")
    def enable(self, request: HttpRequest, queryset: QuerySet[McpServer]) -> None:
        self._set_enabled(request, queryset, enabled=True)

    @admin.action(description="Disable")
    def disable(self, request: HttpRequest, queryset: QuerySet[McpServer]) -> None:
        self._set_enabled(request, queryset, enabled=False)

    def _set_enabled(
        self, request: HttpRequest, queryset: QuerySet[McpServer], *, enabled: bool
    ) -> None:
        done = 0
        for server in queryset:
            try:
                services.set_enabled(server=server, enabled=enabled)
            except ValidationError as exc:
                # A server saved before a rule existed: say which, and go on with the others.
                self.message_user(
                    request, f"{server.name}: {'; '.join(exc.messages)}", messages.ERROR
                )
                continue
            done += 1
        verb = "Enabled" if enabled else "Disabled"
        self.message_user(request, f"{verb} {done} server(s)", messages.SUCCESS)
