"""Teams, people's own policies, named tokens and sign-in identities in the admin.

Staff see and manage every team. A team's admins who are not staff sign in to the admin
too (`teams_app.admin_site`) and see the Teams section alone, with only the teams they
administer: there they set the members of a team whose members are not synced from the
identity provider, its policy within the operator's ceiling, its MCP servers and skills
(from those their teams have), and see what its members spent and what its chats used, by
the member who sent each message. Another team's page is a
404 to them; its admins, its name and whether it is synced are staff's, as are making and
deleting teams. Each change is in the audit log with the person who made it.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.auth.models import Group
from django.db.models import Count, QuerySet
from django.http import Http404, HttpRequest

from teams_app import services
from teams_app.admin_forms import POLICY_FIELDS, PersonalPolicyForm, PolicyForm, TeamForm
from teams_app.admin_site import administers_a_team, open_to_team_admins
from teams_app.admin_usage import DAYS, chat_usage_table, usage_table
from teams_app.models import ApiToken, PersonalPolicy, PolicyFields, SignInIdentity, Team

open_to_team_admins(admin.site)

CEILING = (
    "The site's settings are the ceiling: a policy narrows what they allow, and what goes "
    "past them has no effect. A team admin cannot save a value past them."
)


def policy_summary(policy: PolicyFields, budget: Any = None) -> str:
    """A policy in a line: only what it says, "the site's" for the rest."""
    parts = []
    if policy.allowed_models is not None:
        parts.append(f"models: {', '.join(policy.allowed_models) or 'none'}")
    if policy.tools is not None:
        parts.append(f"{len(policy.tools)} tools")
    if policy.approve_tools:
        parts.append(f"waits: {', '.join(policy.approve_tools)}")
    if policy.turn_rate:
        parts.append(policy.turn_rate)
    if policy.exec_network is not None:
        parts.append("network" if policy.exec_network else "no network")
    if budget is not None:
        parts.append(f"${budget}/member/day")
    return " · ".join(parts) or "the site's"


class PolicyAdmin(admin.ModelAdmin):
    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if isinstance(form, PolicyForm) and not form.limited:
            for note in form.ceiling_notes():
                self.message_user(request, f"{note} It is saved, to no effect.", messages.WARNING)


@admin.register(Team)
class TeamAdmin(PolicyAdmin):
    form = TeamForm
    list_display = ("slug", "name", "member_count", "admin_names", "synced", "policy")
    list_filter = ("synced",)
    search_fields = ("slug", "name")
    filter_horizontal = ("admins", "mcp_servers", "skills")
    fieldsets = (
        (None, {"fields": ("slug", "name", "synced", "members", "admins")}),
        ("Policy", {"fields": POLICY_FIELDS, "description": CEILING}),
        ("Budgets", {"fields": ("member_daily_budget", "team_daily_budget")}),
        (
            "MCP servers and skills",
            {
                "fields": ("mcp_servers", "skills"),
                "description": "A server or skill assigned to teams is theirs alone; one "
                "assigned to none is everyone's.",
            },
        ),
        ("Usage", {"fields": ("usage", "chat_usage")}),
    )

    # Who sees what.

    def manages_all(self, request: HttpRequest) -> bool:
        """Staff with the model's permissions (superusers have them all)."""
        user = request.user
        return bool(user.is_active and user.is_staff) and super().has_view_permission(request)

    def _administers(self, request: HttpRequest, obj: Team | None) -> bool:
        if obj is None:
            return administers_a_team(request.user)
        return obj.admins.filter(pk=getattr(request.user, "pk", None) or 0).exists()

    def has_module_permission(self, request: HttpRequest) -> bool:
        return super().has_module_permission(request) or administers_a_team(request.user)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if self.manages_all(request):
            return True
        return self._administers(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if request.user.is_staff and super().has_change_permission(request, obj):
            return True
        return self._administers(request, obj)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_staff) and super().has_add_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_staff) and super().has_delete_permission(request, obj)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Team]:
        teams = (
            super()
            .get_queryset(request)
            .annotate(_members=Count("group__user", distinct=True))
            .prefetch_related("admins")
        )
        if self.manages_all(request):
            return teams
        return teams.filter(admins=request.user)

    def get_object(self, request: HttpRequest, object_id: str, from_field: Any = None) -> Any:
        team = super().get_object(request, object_id, from_field)
        if team is None and not self.manages_all(request):
            # Whether another team exists is not theirs to learn.
            raise Http404("no such team of yours")
        return team

    # The page.

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields: tuple[str, ...] = ("usage", "chat_usage")
        if obj is not None:
            fields += ("slug",)
        if not self.manages_all(request):
            fields += ("name", "synced", "admins")
        return fields

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return [fieldset for fieldset in self.fieldsets if fieldset[0] != "Usage"]
        return self.fieldsets

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kw: Any
    ) -> Any:
        form = super().get_form(request, obj, change, **kw)
        form.limited = not self.manages_all(request)  # type: ignore[attr-defined]
        form.admin = request.user  # type: ignore[attr-defined]
        return form

    def formfield_for_manytomany(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name in ("mcp_servers", "skills") and not self.manages_all(request):
            # A team admin picks from what their teams have, never another team's.
            model = db_field.remote_field.model
            kwargs["queryset"] = model._default_manager.filter(
                teams__admins=request.user
            ).distinct()
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    # The list's columns.

    @admin.display(description="members", ordering="_members")
    def member_count(self, obj: Team) -> int:
        return int(getattr(obj, "_members", 0))

    @admin.display(description="admins")
    def admin_names(self, obj: Team) -> str:
        return ", ".join(sorted(user.get_username() for user in obj.admins.all())) or "-"

    @admin.display(description="policy")
    def policy(self, obj: Team) -> str:
        return policy_summary(obj, obj.member_daily_budget)

    @admin.display(description=f"what members spent (today and the last {DAYS} days)")
    def usage(self, obj: Team) -> Any:
        return usage_table(obj) if obj.pk else "-"

    @admin.display(description=f"what the team's chats used (the last {DAYS} days, by sender)")
    def chat_usage(self, obj: Team) -> Any:
        return chat_usage_table(obj) if obj.pk else "-"

    # Writes, through the services.

    def save_model(self, request: HttpRequest, obj: Team, form: Any, change: bool) -> None:
        if not change:
            # Its group is named as its slug, as `services.create_team` makes it.
            obj.group, _ = Group.objects.get_or_create(name=obj.slug)
        super().save_model(request, obj, form, change)

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        team = form.instance
        members = form.fields.get("members")
        if members is not None and not members.disabled and "members" in form.changed_data:
            services.set_members(team=team, users=form.cleaned_data["members"])
        if "admins" in form.changed_data or "members" in form.changed_data:
            # An admin manages a team they belong to.
            services.set_admins(team=team, users=list(team.admins.all()))

    def delete_model(self, request: HttpRequest, obj: Team) -> None:
        services.delete_team(team=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Team]) -> None:
        for team in queryset:
            services.delete_team(team=team)


@admin.register(PersonalPolicy)
class PersonalPolicyAdmin(PolicyAdmin):
    """A person's own policy, over what their teams say: staff's alone."""

    form = PersonalPolicyForm
    list_display = ("user", "policy", "note", "updated")
    list_select_related = ("user",)
    search_fields = ("user__username", "note")
    raw_id_fields = ("user",)
    fieldsets = (
        (None, {"fields": ("user", "note")}),
        ("Policy", {"fields": POLICY_FIELDS, "description": CEILING}),
    )

    @admin.display(description="policy")
    def policy(self, obj: PersonalPolicy) -> str:
        return policy_summary(obj)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Named tokens, by name and the first characters of their secret; the secret was shown
    once to its owner and its digest is never shown. Deleting one revokes it. Tokens are
    made by their owners (`/api/tokens`), not here."""

    list_display = ("name", "user", "prefix", "created", "expires", "last_used")
    list_select_related = ("user",)
    list_filter = ("expires",)
    search_fields = ("name", "user__username", "prefix")
    fields = ("name", "user", "prefix", "created", "expires", "last_used")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(SignInIdentity)
class SignInIdentityAdmin(admin.ModelAdmin):
    """Who each person is at the identity provider: written by their sign-ins alone."""

    list_display = ("user", "provider", "issuer", "subject", "last_sign_in")
    list_select_related = ("user",)
    list_filter = ("provider",)
    search_fields = ("user__username", "subject", "issuer")
    fields = ("user", "provider", "issuer", "subject", "groups", "last_sign_in")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
