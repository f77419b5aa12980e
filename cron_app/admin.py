"""Cron jobs in the admin. Every write goes through the model's rules (a job needs an owner:
the admin who adds one, unless another is picked): a save re-plans `next_run` when the
timing changed, which the dispatchers then keep to; the actions go through the services.

The limits a job carries from the agent's turn that scheduled it (`tools`, `approve_tools`)
are staff's to change here, and only here: the API shows them read-only."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from cron_app import services
from cron_app.models import SCHEDULE_FIELDS, CronJob

EDITABLE = ("owner", "name", "message", "session", "enabled")
SCHEDULE = ("kind", "every_seconds", "cron_expr", "tz", "at")
CARRIED = ("tools", "approve_tools")


class CronJobForm(forms.ModelForm):
    class Meta:
        model = CronJob
        fields = (*EDITABLE, *SCHEDULE, *CARRIED)

    def clean(self) -> dict[str, Any] | None:
        cleaned = super().clean()
        owner = self.cleaned_data.get("owner")
        adding = self.instance.pk is None
        if owner is not None and (adding or "owner" in self.changed_data):
            # The admin saves the form in the transaction it validates it in: the owner's
            # row stays locked until the job is saved.
            services.make_room(owner_id=owner.pk, moving=None if adding else self.instance.pk)
        return cleaned

    def clean_approve_tools(self) -> Any:
        # Left empty: nothing carried, as a new job has it, rather than a JSON null.
        value = self.cleaned_data.get("approve_tools")
        return [] if value is None else value

    def timing_changed(self) -> bool:
        return bool(SCHEDULE_FIELDS & set(self.changed_data))


@admin.register(CronJob)
class CronJobAdmin(admin.ModelAdmin):
    form = CronJobForm
    list_display = (
        "name",
        "owner",
        "schedule",
        "session",
        "enabled",
        "last_run",
        "last_status",
        "next_run",
    )
    list_filter = ("kind", "enabled", "last_status")
    search_fields = ("name", "message", "session")
    list_select_related = ("owner",)
    readonly_fields = ("last_run", "last_status", "last_error", "next_run", "created", "updated")
    fieldsets = (
        (None, {"fields": EDITABLE}),
        ("Schedule", {"fields": SCHEDULE}),
        (
            "Carried from the turn that scheduled it",
            {
                "fields": CARRIED,
                "description": "What the agent's turn that made this job was limited to, "
                "which its runs keep to. A job made here or through the API carries "
                "nothing: every tool, and nothing waits besides what waits anyway.",
            },
        ),
        ("Runs", {"fields": readonly_fields}),
    )
    actions = ("run_now", "enable", "disable")

    @admin.display(description="schedule")
    def schedule(self, obj: CronJob) -> str:
        return obj.describe()

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        initial = super().get_changeform_initial_data(request)
        initial.setdefault("owner", str(request.user.pk))
        return initial

    def save_model(self, request: HttpRequest, obj: CronJob, form: Any, change: bool) -> None:
        # The form has run the model's `full_clean` already; what the services would add is
        # the plan, and only a change of timing makes a new one (a rename keeps next_run).
        if not change or form.timing_changed():
            obj.plan(timezone.now())
        super().save_model(request, obj, form, change)

    @admin.action(description="Run now")
    def run_now(self, request: HttpRequest, queryset: QuerySet[CronJob]) -> None:
        jobs = list(queryset)
        for job in jobs:
            services.run_now(job=job)
        self.message_user(request, f"Queued {len(jobs)} job(s)", messages.SUCCESS)

    @admin.action(description="Enable")
    def enable(self, request: HttpRequest, queryset: QuerySet[CronJob]) -> None:
        self._set_enabled(request, queryset, enabled=True)

    @admin.action(description="Disable")
    def disable(self, request: HttpRequest, queryset: QuerySet[CronJob]) -> None:
        self._set_enabled(request, queryset, enabled=False)

    def _set_enabled(
        self, request: HttpRequest, queryset: QuerySet[CronJob], *, enabled: bool
    ) -> None:
        done, idle = 0, []
        for job in queryset:
            try:
                job = services.set_enabled(job=job, enabled=enabled)
            except ValidationError as exc:
                # A job saved before a rule existed: say which, and go on with the others.
                self.message_user(request, f"{job.name}: {'; '.join(exc.messages)}", messages.ERROR)
                continue
            done += 1
            if enabled and job.next_run is None:
                idle.append(job.name)
        verb = "Enabled" if enabled else "Disabled"
        self.message_user(request, f"{verb} {done} job(s)", messages.SUCCESS)
        if idle:
            self.message_user(
                request,
                f"Will not run again (a one-off time that has passed): {', '.join(idle)}",
                messages.WARNING,
            )
