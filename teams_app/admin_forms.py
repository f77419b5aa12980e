"""The admin's forms of a policy (a team's, a person's own): lists of models and tools as
boxes to tick, tools that wait and turn rates as text, each checked as it is typed, and
the operator's settings as the ceiling.

A team admin who is not staff cannot go past the ceiling: a model or a tool the site does
not offer, `exec` on the network when AGENT_EXEC_NETWORK is off, a member budget above
AGENT_USER_DAILY_BUDGET, a rate faster than AGENT_TURN_RATE; the form says which and why.
Staff may save such a value (the operator may raise the ceiling later), and are told that
it has no effect while the ceiling stands (`ceiling_notes`).

The names of the tools come from the turn package, which lies above this data app: the
agent's admin module hands its lookup over (`use_tool_names`). Until it has, tools are
typed as names and checked only for their form.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from typing import Any

from django import forms
from django.contrib.admin.widgets import FilteredSelectMultiple
from django.contrib.auth import get_user_model

from agent import tool_patterns
from agent.conf import AgentSettings, agent_settings
from teams_app import rules
from teams_app.models import PersonalPolicy, Team
from teams_app.policy import rate_per_second

# What the turn's rate limit reads: a count, a slash, and a period named by its first
# letter (30/min, 500/day), as AGENT_TURN_RATE is written.
_RATE = re.compile(r"^\s*[1-9]\d*\s*/\s*[smhd][a-z]*\s*$", re.IGNORECASE)
POLICY_FIELDS = ("allowed_models", "tools", "approve_tools", "turn_rate", "exec_network")

_tool_names: Callable[[AgentSettings], Sequence[str]] | None = None


def use_tool_names(lookup: Callable[[AgentSettings], Sequence[str]]) -> None:
    """Where the policy forms find the names of the site's tools (the turn package's)."""
    global _tool_names
    _tool_names = lookup


def site_tool_names(conf: AgentSettings) -> list[str] | None:
    """The tools the site offers; None while no lookup was handed over."""
    return None if _tool_names is None else sorted(_tool_names(conf))


def comma_list(value: Any) -> str:
    return ", ".join(str(item) for item in value or ())


def _split(text: str) -> list[str]:
    return [item for item in text.replace(",", " ").split() if item]


def _ticked(choices: Iterable[str], stored: Iterable[str] | None) -> list[tuple[str, str]]:
    """The boxes: what the site offers, then what was stored and no longer is, marked."""
    offered = list(dict.fromkeys(choices))
    gone = [name for name in stored or () if name not in offered]
    return [(n, n) for n in offered] + [(n, f"{n} (not offered by this site)") for n in gone]


class PolicyForm(forms.ModelForm):
    """The policy's fields of a team or a person. `limited`: the ceiling is enforced
    (a team admin who is not staff); set on the class the admin makes for each request."""

    limited = False
    # The person at the page (a team's admin, when `limited`).
    admin: Any = None

    allowed_models = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Models",
        help_text="The models its members may pick. None ticked: every model the site offers.",
    )
    approve_tools = forms.CharField(
        required=False,
        label="Tools that wait",
        help_text="Tool names or patterns whose calls wait for a yes, separated by commas, "
        "such as exec, mcp_github_*.",
    )
    turn_rate = forms.CharField(
        required=False,
        max_length=40,
        help_text="Turns each member may start, as 30/min or 500/day; empty: the site's rate.",
    )
    exec_network = forms.NullBooleanField(
        required=False,
        label="Exec may use the network",
        widget=forms.NullBooleanSelect,
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conf = agent_settings()
        conf = self.conf
        stored = self.instance
        models = self.fields["allowed_models"]
        assert isinstance(models, forms.MultipleChoiceField)
        models.choices = _ticked(conf.models, stored.allowed_models)
        self.initial["allowed_models"] = list(stored.allowed_models or ())
        self.initial["approve_tools"] = comma_list(stored.approve_tools)
        names = site_tool_names(conf)
        if names is None:
            self.fields["tools"] = forms.CharField(
                required=False,
                help_text="Tool names its agents may use, separated by commas; empty: every tool.",
            )
            self.initial["tools"] = comma_list(stored.tools)
        else:
            self.fields["tools"] = forms.MultipleChoiceField(
                required=False,
                widget=forms.CheckboxSelectMultiple,
                choices=_ticked(names, stored.tools),
                help_text="The tools its agents may use. None ticked: every tool.",
            )
            self.initial["tools"] = list(stored.tools or ())
        self.fields["exec_network"].widget.choices = [
            ("unknown", "The site's setting"),
            ("true", "Yes"),
            ("false", "No"),
        ]
        self.fields["exec_network"].help_text = (
            f"Whether exec may reach the network. The site's setting is "
            f"{'on' if conf.exec_network else 'off'} (AGENT_EXEC_NETWORK)"
            + ("." if conf.exec_network else ": it stays off whatever a policy says.")
        )
        if conf.turn_rate:
            self.fields[
                "turn_rate"
            ].help_text += f" The site's rate, the fastest: {conf.turn_rate}."
        self.site_tools = names

    # Each field's own checks.

    def clean_allowed_models(self) -> list[str] | None:
        return list(self.cleaned_data["allowed_models"]) or None

    def clean_tools(self) -> list[str] | None:
        value = self.cleaned_data["tools"]
        names = _split(value) if isinstance(value, str) else list(value)
        wrong = [name for name in names if not tool_patterns.PATTERN.match(name) or "*" in name]
        if wrong:
            raise forms.ValidationError(f"Not a tool's name: {', '.join(wrong)}.")
        return list(dict.fromkeys(names)) or None

    def clean_approve_tools(self) -> list[str]:
        patterns = _split(self.cleaned_data["approve_tools"])
        found = tool_patterns.problems(patterns)
        if found:
            raise forms.ValidationError(found)
        return list(dict.fromkeys(patterns))

    def clean_turn_rate(self) -> str:
        rate = self.cleaned_data["turn_rate"].strip()
        if rate and (not _RATE.match(rate) or rate_per_second(rate) is None):
            raise forms.ValidationError(
                f"Write a rate as AGENT_TURN_RATE is written: 30/min or 500/day, not {rate!r}."
            )
        return rate.replace(" ", "")

    # The ceiling.

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        for field, problem in self.past_ceiling(cleaned):
            if self.limited:
                self.add_error(field, problem)
        return cleaned

    def ceiling_notes(self) -> list[str]:
        """What staff saved past the operator's ceiling, which holds regardless."""
        return [problem for _, problem in self.past_ceiling(self.cleaned_data)]

    def past_ceiling(self, cleaned: dict[str, Any]) -> list[tuple[str, str]]:
        """(field, why) for each value of `cleaned` changed past the operator's settings."""
        conf = self.conf
        found: list[tuple[str, str]] = []
        changed = set(self.changed_data)
        if "allowed_models" in changed:
            added = set(cleaned.get("allowed_models") or ()) - set(self.initial["allowed_models"])
            extra = sorted(added - set(conf.models))
            if extra:
                found.append(
                    (
                        "allowed_models",
                        f"This site does not offer {', '.join(extra)} (AGENT_MODEL and "
                        "AGENT_MODELS): a policy cannot allow it.",
                    )
                )
        if "tools" in changed and self.site_tools is not None:
            added = set(cleaned.get("tools") or ()) - set(self.instance.tools or ())
            extra = sorted(added - set(self.site_tools))
            if extra:
                found.append(
                    (
                        "tools",
                        f"This site has no tool {', '.join(extra)}: a policy cannot allow it.",
                    )
                )
        if "exec_network" in changed and cleaned.get("exec_network") and not conf.exec_network:
            found.append(
                (
                    "exec_network",
                    "Exec may not use the network on this site (AGENT_EXEC_NETWORK is off): a "
                    "policy cannot turn it on.",
                )
            )
        rate = cleaned.get("turn_rate") or ""
        ceiling = rate_per_second(conf.turn_rate)
        asked = rate_per_second(rate)
        if "turn_rate" in changed and None not in (asked, ceiling) and asked > ceiling:  # type: ignore[operator]
            found.append(
                (
                    "turn_rate",
                    f"{rate} is faster than the site's rate, {conf.turn_rate} "
                    "(AGENT_TURN_RATE): a policy cannot go past it.",
                )
            )
        return found


class TeamForm(PolicyForm):
    """A team: its profile, members, admins, policy, budgets, MCP servers and skills."""

    members = forms.ModelMultipleChoiceField(
        queryset=get_user_model()._default_manager.none(),
        required=False,
        widget=FilteredSelectMultiple("members", is_stacked=False),
    )

    class Meta:
        model = Team
        fields = (
            "slug",
            "name",
            "synced",
            "admins",
            *POLICY_FIELDS,
            "member_daily_budget",
            "team_daily_budget",
            "mcp_servers",
            "skills",
        )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        members = self.fields.get("members")
        if not isinstance(members, forms.ModelMultipleChoiceField):  # read-only on this page
            return
        people = get_user_model()._default_manager.order_by("username")
        team = self.instance
        current = team.group.user_set.all() if team.pk else people.none()
        ids = list(current.values_list("pk", flat=True))
        members.queryset = people.filter(is_active=True) | people.filter(pk__in=ids)
        self.initial["members"] = list(current)
        if team.pk and team.synced:
            members.disabled = True
            members.help_text = (
                "Set by the identity provider at each sign-in (its group named "
                f"{team.slug}), so they are not edited here. Turn off “synced” to set them by "
                "hand."
            )
        else:
            members.help_text = "People in this team; its admins are made members too."

    def past_ceiling(self, cleaned: dict[str, Any]) -> list[tuple[str, str]]:
        found = super().past_ceiling(cleaned)
        site = Decimal(str(self.conf.user_daily_budget)) if self.conf.user_daily_budget else None
        member = cleaned.get("member_daily_budget")
        changed = "member_daily_budget" in self.changed_data
        if changed and site is not None and member is not None and member > site:
            found.append(
                (
                    "member_daily_budget",
                    f"${member} is above the site's daily budget of ${site} "
                    "(AGENT_USER_DAILY_BUDGET): only staff lift a person's budget, on "
                    "their account.",
                )
            )
        return found

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if self.limited:
            self._team_budget_only_narrows(cleaned)
            for field in ("mcp_servers", "skills"):
                self._stays_the_teams(field, cleaned)
        return cleaned

    def _team_budget_only_narrows(self, cleaned: dict[str, Any]) -> None:
        if not rules.team_budget_narrows(self.instance, cleaned.get("team_daily_budget")):
            self.add_error(
                "team_daily_budget",
                f"A team admin may lower the team's daily budget "
                f"(${self.instance.team_daily_budget}), not raise or remove it: ask staff.",
            )

    def _stays_the_teams(self, field: str, cleaned: dict[str, Any]) -> None:
        if field not in cleaned or not self.instance.pk:
            return
        problem = rules.assignment_problem(self.instance, field, cleaned[field], admin=self.admin)
        if problem:
            self.add_error(field, problem)


class PersonalPolicyForm(PolicyForm):
    class Meta:
        model = PersonalPolicy
        fields = ("user", *POLICY_FIELDS, "note")
