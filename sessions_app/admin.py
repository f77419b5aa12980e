from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib import admin
from django.db.models import (
    BigIntegerField,
    Count,
    DecimalField,
    DurationField,
    ExpressionWrapper,
    F,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
)
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Coalesce
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join

# admin_usage, admin_shares: their pages register as they load.
from sessions_app import admin_shares, admin_usage, services  # noqa: F401
from sessions_app.admin_links import chat_link, clipped, viewer_owns, when
from sessions_app.durations import between
from sessions_app.models import (
    Approval,
    Memory,
    Message,
    Run,
    Session,
)
from sessions_app.timeline import timeline as run_timeline
from sessions_app.usage import ZERO, usage_dict

LATEST = 20
# The lists' stylesheet: long text cut, so that a list fits the window (`admin_links.clipped`).
LIST_CSS = "sessions_app/admin_lists.css"


def usage_columns() -> dict[str, Any]:
    """A session's usage summed over its runs, each sum a subquery: joined to the runs, the
    message count beside them would count each message once per run."""
    runs = Run.objects.filter(session=OuterRef("pk")).order_by().values("session")

    def summed(value: Any, output: Any) -> Coalesce:
        return Coalesce(Subquery(runs.annotate(v=value).values("v")), 0, output_field=output)

    tokens = Sum(Cast(KT("usage__total_tokens"), BigIntegerField()))
    unpriced = Count("pk", filter=Q(cost__isnull=True, usage__total_tokens__gt=0))
    return {
        "_total_tokens": summed(tokens, BigIntegerField()),
        "_priced_cost": summed(Sum("cost"), DecimalField(max_digits=14, decimal_places=6)),
        "_unpriced_runs": summed(unpriced, BigIntegerField()),
    }


def usage_text(obj: Any) -> str:
    """The session's tokens and cost, as "1,234 tokens · $0.0123" (plus how many runs had no
    known price)."""
    used = usage_dict(
        prompt=0,
        completion=0,
        total=getattr(obj, "_total_tokens", 0) or 0,
        priced_cost=getattr(obj, "_priced_cost", ZERO) or ZERO,
        unpriced_runs=getattr(obj, "_unpriced_runs", 0) or 0,
    )
    text = f"{used['total_tokens']:,} tokens"
    if used["unpriced_runs"]:
        return f"{text} · ${used['priced_cost']:.4f} + {used['unpriced_runs']} unpriced"
    return f"{text} · ${used['priced_cost']:.4f}"


def _latest(lines: Iterable[tuple[Any, str]], model: str, session: Session, every: str) -> str:
    """A list of rows, each linked to its own page, and a link to all of the session's."""
    items = format_html_join(
        "",
        "<li><a href='{}'>{}</a> {}</li>",
        (
            (
                reverse(f"admin:sessions_app_{model}_change", args=[row.pk]),
                row.created.strftime("%Y-%m-%d %H:%M"),
                text,
            )
            for row, text in lines
        ),
    )
    url = reverse(f"admin:sessions_app_{model}_changelist") + f"?session__id__exact={session.pk}"
    return format_html("<ul>{}</ul><a href='{}'>{}</a>", items, url, every)


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    # The channel is the key's prefix: not a column of its own (it is a filter).
    list_display = (
        "short_key",
        "short_title",
        "owner",
        "team",
        "model",
        "message_count",
        "usage",
        "last_updated",
        "open_in_chat",
    )
    list_filter = ("channel", "owner", "team")
    # Indexed fields only: a search through every message's text would scan them all.
    search_fields = ("key", "owner__username", "team__name")
    readonly_fields = (
        "key",
        "open_in_chat",
        "channel",
        "chat_id",
        "last_consolidated",
        "created",
        "updated",
        "latest_messages",
        "latest_runs",
    )
    fields = (
        "key",
        "open_in_chat",
        "channel",
        "chat_id",
        "owner",
        "team",
        "title",
        "model",
        "approve_tools",
        "allowed_tools",
        "last_consolidated",
        "created",
        "updated",
        "latest_messages",
        "latest_runs",
    )
    date_hierarchy = "updated"

    class Media:
        css = {"all": [LIST_CSS]}

    def delete_model(self, request: HttpRequest, obj: Session) -> None:
        services.delete_session(session=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Session]) -> None:
        # One by one, each locked first (`delete_session`): a chat whose turn is writing
        # meanwhile is deleted all the same.
        for session in queryset:
            services.delete_session(session=session)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # conversations make sessions; a key typed here would name none

    def get_queryset(self, request: HttpRequest) -> QuerySet[Session]:
        return (
            super()
            .get_queryset(request)
            .select_related("owner", "team")
            .annotate(
                _messages=Count("messages"),
                _mine=viewer_owns(request.user.pk),
                **usage_columns(),
            )
        )

    @admin.display(ordering="key", description="key")
    def short_key(self, obj: Session) -> str:
        return clipped(obj.key, 36)

    @admin.display(ordering="title", description="title")
    def short_title(self, obj: Session) -> str:
        return clipped(obj.title, 48)

    @admin.display(ordering="updated", description="updated")
    def last_updated(self, obj: Session) -> str:
        return when(obj.updated)

    @admin.display(description="chat")
    def open_in_chat(self, obj: Session) -> str:
        return chat_link(obj.key, bool(getattr(obj, "_mine", False)))

    # A session may hold tens of thousands of messages: the page shows the newest, and the
    # message list (paginated, filtered to the session) has the rest.
    @admin.display(description="latest messages")
    def latest_messages(self, obj: Session) -> str:
        rows = reversed(list(obj.messages.order_by("-id")[:LATEST]))
        lines = ((m, f"{_archived_mark(m)}{m.role}: {(m.content or '')[:120]}") for m in rows)
        return _latest(lines, "message", obj, "All messages of this session")

    @admin.display(description="latest runs")
    def latest_runs(self, obj: Session) -> str:
        # The newest, read in the order they ran, as the messages above them are.
        rows = reversed(list(obj.runs.order_by("-created")[:LATEST]))
        return _latest(((r, run_line(r)) for r in rows), "run", obj, "All runs of this session")

    @admin.display(ordering="_messages", description="messages")
    def message_count(self, obj: Session) -> int:
        return getattr(obj, "_messages", 0)

    @admin.display(ordering="_priced_cost", description="usage")
    def usage(self, obj: Session) -> str:
        return usage_text(obj)


def _archived_mark(message: Message) -> str:
    return "(archived) " if message.archived else ""


def run_line(run: Run) -> str:
    """A run in a list of runs: "succeeded · 1.2 s", and why it failed."""
    took = between(run.started, run.finished)
    return " · ".join(part for part in (run.status, took, run.error or "") if part)


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    # `archived`: taken out of the conversation by /new, an edit or a regeneration, and kept.
    list_display = ("id", "session_key", "role", "short_content", "archived", "when_created")
    list_filter = ("archived", "role", "session__channel")
    search_fields = ("session__key",)
    list_select_related = ("session",)
    # Counting every row of a table this size on each page costs more than the page.
    show_full_result_count = False
    readonly_fields = [f.name for f in Message._meta.fields]

    class Media:
        css = {"all": [LIST_CSS]}

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    @admin.display(ordering="created", description="created")
    def when_created(self, obj: Message) -> str:
        return when(obj.created)

    @admin.display(ordering="session__key", description="session")
    def session_key(self, obj: Message) -> str:
        return clipped(obj.session.key, 36)

    @admin.display(description="content")
    def short_content(self, obj: Message) -> str:
        return clipped(obj.content, 60)


class ApprovalInline(admin.TabularInline):
    """The run's tool calls that waited for a person, and how each was answered."""

    model = Approval
    extra = 0
    can_delete = False
    fields = ("call_id", "name", "arguments", "status", "always", "deadline", "answered")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    # Newest first (`ordering`); when it was queued is on its page.
    list_display = (
        "started_at",
        "finished_at",
        "session_key",
        "status",
        "channel",
        "short_model",
        "iterations",
        "cost",
        "took",
    )
    # The newest first, whatever the model's default order becomes.
    ordering = ("-created",)
    # `status` "waiting": the turns waiting for a person's answers (shown on each run).
    list_filter = ("status", "channel", "model")
    search_fields = ("id", "session__key", "prompt", "text", "error")
    list_select_related = ("session",)
    # The trace is shown as the timeline; the run or cron job that started this run, as
    # links to their pages, and the sub-agents it started below them.
    exclude = ("trace",)
    # Every field is read-only, so the page shows them in this order: the link to the
    # session's chat right after the session.
    readonly_fields = [
        name
        for f in Run._meta.fields
        if f.name != "trace"
        for name in ((f.name, "open_in_chat") if f.name == "session" else (f.name,))
    ] + [
        "took",
        "subagent_runs",
        "timeline",
    ]
    inlines = (ApprovalInline,)

    class Media:
        css = {"all": ["sessions_app/timeline.css", LIST_CSS]}

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[Run]:
        took = ExpressionWrapper(F("finished") - F("started"), output_field=DurationField())
        mine = viewer_owns(request.user.pk, "session__owner")
        return super().get_queryset(request).annotate(_took=took, _mine=mine)

    @admin.display(ordering="started", description="started")
    def started_at(self, obj: Run) -> str:
        return when(obj.started)

    @admin.display(ordering="finished", description="finished")
    def finished_at(self, obj: Run) -> str:
        return when(obj.finished)

    @admin.display(ordering="session__key", description="session")
    def session_key(self, obj: Run) -> str:
        return clipped(obj.session.key, 36)

    @admin.display(ordering="model", description="model")
    def short_model(self, obj: Run) -> str:
        return clipped(obj.model, 32)

    @admin.display(description="chat")
    def open_in_chat(self, obj: Run) -> str:
        return chat_link(obj.session.key, bool(getattr(obj, "_mine", False)))

    # Runs not yet finished have no duration: first when the shortest come first, last when
    # the longest do, on every database (PostgreSQL would put them first both ways).
    @admin.display(ordering=F("_took").asc(nulls_first=True), description="duration")
    def took(self, obj: Run) -> str | None:
        return between(obj.started, obj.finished)

    def _children(self, obj: Run) -> list[Run]:
        # Read once per page, for both fields that show them.
        if getattr(obj, "_children", None) is None:
            obj._children = list(obj.subagents.order_by("created"))  # type: ignore[attr-defined]
        return obj._children  # type: ignore[attr-defined, no-any-return]

    @admin.display(description="sub-agent runs")
    def subagent_runs(self, obj: Run) -> str:
        children = self._children(obj)
        if not children:
            return "—"
        items = format_html_join(
            "",
            "<li><a href='{}'>{}</a> {}</li>",
            (
                (
                    reverse("admin:sessions_app_run_change", args=[c.pk]),
                    c.label or c.pk,
                    run_line(c),
                )
                for c in children
            ),
        )
        return format_html("<ul>{}</ul>", items)

    @admin.display(description="timeline")
    def timeline(self, obj: Run) -> str:
        return run_timeline(obj, self._children(obj))


@admin.register(Memory)
class MemoryAdmin(admin.ModelAdmin):
    list_display = ("__str__", "owner", "team", "session", "updated")
    list_select_related = ("owner", "team", "session")
    list_filter = ("team",)
    search_fields = ("content", "session__key", "owner__username", "team__name")
    raw_id_fields = ("owner", "session")
    readonly_fields = ("created", "updated")


@admin.register(Approval)
class ApprovalAdmin(admin.ModelAdmin):
    """Every tool call that waited for a person; `pending` ones wait now."""

    list_display = ("created", "name", "status", "run", "deadline", "answered", "answered_by")
    list_filter = ("status", "name")
    search_fields = ("call_id", "name", "run__session__key")
    list_select_related = ("run__session", "answered_by")
    readonly_fields = [f.name for f in Approval._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
