"""The admin's pages of what accounts spend and what each user sets for themselves: the daily
usage ledger with its totals, budgets (also inline on a user's page) and preferences."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Sum
from django.http import HttpRequest

from sessions_app.models import DailyUsage, UserBudget, UserPreferences
from sessions_app.usage import ZERO, usage_dict


@admin.register(DailyUsage)
class DailyUsageAdmin(admin.ModelAdmin):
    """Every account's usage, a line per UTC day and model, with the totals of what the
    filters leave above the list."""

    list_display = (
        "day",
        "owner",
        "model",
        "runs",
        "prompt_tokens",
        "completion_tokens",
        "total_tokens",
        "priced_cost",
        "unpriced_runs",
    )
    list_filter = ("day", "model", "owner")
    list_select_related = ("owner",)
    search_fields = ("owner__username", "model")
    date_hierarchy = "day"
    change_list_template = "admin/sessions_app/dailyusage/change_list.html"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> Any:
        response = super().changelist_view(request, extra_context)
        changelist = (getattr(response, "context_data", None) or {}).get("cl")
        if changelist is not None:
            sums = changelist.queryset.aggregate(
                runs=Sum("runs"),
                prompt=Sum("prompt_tokens"),
                completion=Sum("completion_tokens"),
                total=Sum("total_tokens"),
                priced=Sum("priced_cost"),
                unpriced=Sum("unpriced_runs"),
            )
            response.context_data["usage_totals"] = {  # type: ignore[attr-defined]
                "runs": sums["runs"] or 0,
                **usage_dict(
                    prompt=sums["prompt"] or 0,
                    completion=sums["completion"] or 0,
                    total=sums["total"] or 0,
                    priced_cost=sums["priced"] or ZERO,
                    unpriced_runs=sums["unpriced"] or 0,
                ),
            }
        return response


class UserBudgetInline(admin.StackedInline):
    """On a user's page: lift their daily budget, or give them another amount."""

    model = UserBudget
    can_delete = True
    max_num = 1
    extra = 1
    verbose_name = "daily budget"
    verbose_name_plural = "daily budget"


@admin.register(UserBudget)
class UserBudgetAdmin(admin.ModelAdmin):
    list_display = ("user", "unlimited", "daily_budget")
    list_select_related = ("user",)
    search_fields = ("user__username",)
    raw_id_fields = ("user",)


@admin.register(UserPreferences)
class UserPreferencesAdmin(admin.ModelAdmin):
    """What each user adds to the tools that wait for their yes."""

    list_display = (
        "user",
        "approve_tools",
        "heartbeat_tools",
        "heartbeat_approve_tools",
        "updated",
    )
    search_fields = ("user__username",)
    raw_id_fields = ("user",)
    readonly_fields = ("updated",)
