"""Teams in the admin: staff see and manage them all; a team's admin who is not staff signs in
to the admin, sees only the teams they administer (another's page is a 404, every other
section closed), sets members and policy within the operator's ceiling, and sees what the
members spent. Tokens and sign-in identities are there for staff, read-only."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from auditlog.models import LogEntry
from django import forms
from django.contrib.auth.models import Group, User
from django.test import Client
from django.urls import reverse

from mcp_app.models import McpServer
from sessions_app.models import DailyUsage
from sessions_app.usage import today
from teams_app import services
from teams_app.models import ApiToken, PersonalPolicy, Team

pytestmark = pytest.mark.django_db

TEAMS = reverse("admin:teams_app_team_changelist")
ADD = reverse("admin:teams_app_team_add")


def change_url(team: Team) -> str:
    return reverse("admin:teams_app_team_change", args=[team.pk])


@pytest.fixture(autouse=True)
def ceiling(settings: Any) -> Any:
    """The operator's settings the policies stay under."""
    settings.AGENT_MODEL = "openai/small"
    settings.AGENT_MODELS = ["openai/large"]
    settings.AGENT_EXEC_NETWORK = False
    settings.AGENT_USER_DAILY_BUDGET = 5.0
    settings.AGENT_TURN_RATE = "30/min"
    return settings


def signed_in(username: str, password: str) -> Client:
    """A client signed in through the admin's own login page, as a person would be."""
    client = Client()
    answer = client.post(
        reverse("admin:login") + "?next=/admin/",
        {"username": username, "password": password, "next": "/admin/"},
    )
    assert answer.status_code == 302 and answer["Location"] == "/admin/", answer.content[:400]
    return client


@pytest.fixture
def admin_client(db: None) -> Client:
    User.objects.create_superuser("root", password="pw-root-123")
    return signed_in("root", "pw-root-123")


@pytest.fixture
def teams(db: None) -> dict[str, Team]:
    eng = services.create_team(slug="eng", name="Engineering", synced=False)
    ops = services.create_team(slug="ops", name="Operations")
    return {"eng": eng, "ops": ops}


@pytest.fixture
def lead(teams: dict[str, Team]) -> User:
    """Eng's admin, not staff."""
    user = User.objects.create_user("lead", password="pw-lead-123")
    services.set_admins(team=teams["eng"], users=[user])
    return user


@pytest.fixture
def lead_client(lead: User) -> Client:
    return signed_in("lead", "pw-lead-123")


def form_data(page: Any, **changes: Any) -> dict[str, Any]:
    """What the change page's form would send back as it stands, with `changes`."""
    form = page.context["adminform"].form
    data: dict[str, Any] = {}
    for name, field in form.fields.items():
        if field.disabled:
            continue
        value = form[name].value()
        if isinstance(field, forms.NullBooleanField):
            data[name] = {True: "true", False: "false"}.get(value, "unknown")
        elif isinstance(field, forms.BooleanField):
            if value:
                data[name] = "on"
        elif isinstance(field, forms.MultipleChoiceField | forms.ModelMultipleChoiceField):
            data[name] = [str(item) for item in value or ()]
        else:
            data[name] = "" if value is None else str(value)
    for name, value in changes.items():
        if value is None:
            data.pop(name, None)
        else:
            data[name] = value
    return data


def errors(page: Any) -> dict[str, list[str]]:
    form = page.context["adminform"].form
    return {name: list(found) for name, found in form.errors.items()}


# ---- staff --------------------------------------------------------------------------------


def test_staff_see_every_team_with_its_members_admins_and_policy(
    admin_client: Client, teams: dict[str, Team], lead: User
) -> None:
    Team.objects.filter(pk=teams["ops"].pk).update(turn_rate="10/min", approve_tools=["exec"])
    listed = admin_client.get(TEAMS)
    assert listed.status_code == 200
    assert [team.slug for team in listed.context["cl"].result_list] == ["eng", "ops"]
    text = listed.content.decode()
    assert "Engineering" in text and "lead" in text and "waits: exec · 10/min" in text
    assert admin_client.get(change_url(teams["ops"])).status_code == 200
    assert admin_client.get(ADD).status_code == 200


def test_staff_create_change_and_delete_a_team(admin_client: Client) -> None:
    ada = User.objects.create_user("ada")
    made = admin_client.get(ADD)
    answer = admin_client.post(
        ADD,
        form_data(
            made,
            slug="research",
            name="Research",
            synced=None,
            members=[str(ada.pk)],
            allowed_models=["openai/large"],
            approve_tools="exec, mcp_github_*",
            turn_rate="10/min",
            member_daily_budget="2.50",
        ),
    )
    assert answer.status_code == 302, errors(answer)
    team = Team.objects.get(slug="research")
    assert team.group.name == "research" and list(team.group.user_set.all()) == [ada]
    assert team.allowed_models == ["openai/large"] and team.approve_tools == [
        "exec",
        "mcp_github_*",
    ]
    assert team.turn_rate == "10/min" and team.member_daily_budget == Decimal("2.50")
    assert team.tools is None and team.exec_network is None

    page = admin_client.get(change_url(team))
    assert page.context["adminform"].form.fields.get("slug") is None  # fixed once made
    answer = admin_client.post(change_url(team), form_data(page, allowed_models=[]))
    assert answer.status_code == 302, errors(answer)
    team.refresh_from_db()
    assert team.allowed_models is None

    delete = reverse("admin:teams_app_team_delete", args=[team.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 302
    assert not Team.objects.filter(slug="research").exists()
    assert not Group.objects.filter(name="research").exists()


def test_a_turn_rate_is_checked_as_the_sites_is(admin_client: Client, teams: dict) -> None:
    page = admin_client.get(change_url(teams["eng"]))
    answer = admin_client.post(change_url(teams["eng"]), form_data(page, turn_rate="lots"))
    assert answer.status_code == 200, answer.get("Location")
    assert "30/min or 500/day" in " ".join(errors(answer)["turn_rate"])
    answer = admin_client.post(
        change_url(teams["eng"]), form_data(page, approve_tools="exec, ../x")
    )
    assert answer.status_code == 200 and "approve_tools" in errors(answer)


def test_staff_are_told_what_goes_past_the_ceiling(admin_client: Client, teams: dict) -> None:
    page = admin_client.get(change_url(teams["eng"]))
    answer = admin_client.post(
        change_url(teams["eng"]), form_data(page, exec_network="true"), follow=True
    )
    assert answer.status_code == 200
    teams["eng"].refresh_from_db()
    assert teams["eng"].exec_network is True
    said = [str(message) for message in answer.context["messages"]]
    assert any("AGENT_EXEC_NETWORK is off" in text and "no effect" in text for text in said)


def test_members_of_a_synced_team_are_left_to_sign_ins(
    admin_client: Client, teams: dict[str, Team]
) -> None:
    ops = teams["ops"]
    bea = User.objects.create_user("bea")
    ops.group.user_set.add(bea)
    page = admin_client.get(change_url(ops))
    field = page.context["adminform"].form.fields["members"]
    assert field.disabled and "identity provider" in str(field.help_text)
    other = User.objects.create_user("cy")
    answer = admin_client.post(change_url(ops), {**form_data(page), "members": [str(other.pk)]})
    assert answer.status_code == 302, errors(answer)
    assert list(ops.group.user_set.all()) == [bea]


# ---- a team admin -------------------------------------------------------------------------


def test_a_team_admin_sees_only_their_team(
    lead_client: Client, teams: dict[str, Team], lead: User
) -> None:
    index = lead_client.get("/admin/")
    assert index.status_code == 200
    apps = index.context["app_list"]
    assert [(app["app_label"], [m["object_name"] for m in app["models"]]) for app in apps] == [
        ("teams_app", ["Team"])
    ]
    listed = lead_client.get(TEAMS)
    assert [team.slug for team in listed.context["cl"].result_list] == ["eng"]
    assert "Operations" not in listed.content.decode()
    assert lead_client.get(change_url(teams["eng"])).status_code == 200
    assert lead_client.get(change_url(teams["ops"])).status_code == 404
    assert lead_client.post(change_url(teams["ops"]), {"name": "Mine"}).status_code == 404
    # No other section, no making or deleting teams, no audit log.
    assert lead_client.get(ADD).status_code == 403
    delete = reverse("admin:teams_app_team_delete", args=[teams["eng"].pk])
    assert lead_client.post(delete, {"post": "yes"}).status_code == 403
    for name in (
        "admin:auth_user_changelist",
        "admin:sessions_app_session_changelist",
        "admin:teams_app_apitoken_changelist",
        "admin:teams_app_personalpolicy_changelist",
        "admin:auditlog_logentry_changelist",
    ):
        assert lead_client.get(reverse(name)).status_code == 403, name
    assert Team.objects.filter(slug="eng").exists()


def test_someone_who_administers_no_team_stays_out(teams: dict[str, Team]) -> None:
    User.objects.create_user("member", password="pw-member-123")
    client = Client()
    answer = client.post(
        reverse("admin:login"), {"username": "member", "password": "pw-member-123"}
    )
    assert answer.status_code == 200  # the form again, with its error
    assert "staff account" in answer.content.decode()
    client = Client()
    assert client.post("/accounts/login/", {"username": "member", "password": "pw-member-123"})[
        "Location"
    ]
    assert client.get("/admin/").status_code == 302


def test_a_team_admin_sets_members_and_policy_within_the_ceiling(
    lead_client: Client, teams: dict[str, Team], lead: User
) -> None:
    eng = teams["eng"]
    bea = User.objects.create_user("bea")
    page = lead_client.get(change_url(eng))
    form = page.context["adminform"].form
    # The profile, its admins and its syncing are staff's.
    assert not {"name", "synced", "admins", "slug"} & set(form.fields)
    answer = lead_client.post(
        change_url(eng),
        form_data(
            page,
            members=[str(lead.pk), str(bea.pk)],
            allowed_models=["openai/small"],
            turn_rate="10/min",
            member_daily_budget="4",
            team_daily_budget="20",
        ),
    )
    assert answer.status_code == 302, errors(answer)
    eng.refresh_from_db()
    assert set(eng.group.user_set.values_list("username", flat=True)) == {"lead", "bea"}
    assert eng.allowed_models == ["openai/small"] and eng.turn_rate == "10/min"
    assert eng.member_daily_budget == Decimal("4") and eng.team_daily_budget == Decimal("20")
    # In the audit log as theirs: the team's change, and bea's joining.
    changed = LogEntry.objects.filter(content_type__model="team", object_pk=str(eng.pk)).first()
    assert changed is not None and changed.actor == lead
    assert changed.changes_dict["turn_rate"] == ["", "10/min"]
    joined = LogEntry.objects.get(
        content_type__model="user", object_pk=str(bea.pk), action=LogEntry.Action.UPDATE
    )
    assert joined.actor == lead and joined.changes_dict["groups"]["objects"] == ["eng"]

    page = lead_client.get(change_url(eng))
    past = lead_client.post(
        change_url(eng),
        form_data(
            page,
            allowed_models=["openai/small", "openai/secret"],
            exec_network="true",
            member_daily_budget="50",
            turn_rate="100/min",
            team_daily_budget="200",
        ),
    )
    assert past.status_code == 200
    found = errors(past)
    assert "AGENT_EXEC_NETWORK is off" in found["exec_network"][0]
    assert "AGENT_USER_DAILY_BUDGET" in found["member_daily_budget"][0]
    assert "AGENT_TURN_RATE" in found["turn_rate"][0]
    assert "not raise or remove" in found["team_daily_budget"][0]
    assert "allowed_models" in found  # a model the site does not offer is no choice at all
    eng.refresh_from_db()
    assert eng.exec_network is None and eng.member_daily_budget == Decimal("4")


def test_a_team_admin_cannot_take_a_teams_server_off_to_everyone(
    lead_client: Client, teams: dict[str, Team]
) -> None:
    eng, ops = teams["eng"], teams["ops"]
    own = McpServer.objects.create(name="eng-tools", transport="http", url="http://x.test/")
    theirs = McpServer.objects.create(name="ops-tools", transport="http", url="http://y.test/")
    McpServer.objects.create(name="everyone", transport="http", url="http://z.test/")
    eng.mcp_servers.add(own)
    ops.mcp_servers.add(theirs)
    page = lead_client.get(change_url(eng))
    offered = page.context["adminform"].form.fields["mcp_servers"].queryset
    assert [server.name for server in offered] == ["eng-tools"]
    answer = lead_client.post(change_url(eng), form_data(page, mcp_servers=None))
    assert answer.status_code == 200
    assert "everyone's" in errors(answer)["mcp_servers"][0]
    answer = lead_client.post(change_url(eng), form_data(page, mcp_servers=[str(theirs.pk)]))
    assert answer.status_code == 200 and "mcp_servers" in errors(answer)
    assert list(eng.mcp_servers.all()) == [own]


def test_the_usage_shows_today_and_the_last_30_days(
    lead_client: Client, teams: dict[str, Team], lead: User
) -> None:
    eng = teams["eng"]
    bea = User.objects.create_user("bea")
    outsider = User.objects.create_user("zed")
    eng.group.user_set.add(bea)
    now = today()
    DailyUsage.objects.create(owner=lead, day=now, model="m", runs=1, priced_cost=Decimal("1.25"))
    DailyUsage.objects.create(
        owner=bea, day=now - timedelta(days=3), model="m", runs=2, priced_cost=Decimal("2.50")
    )
    DailyUsage.objects.create(
        owner=bea, day=now - timedelta(days=40), model="m", runs=1, priced_cost=Decimal("9")
    )
    DailyUsage.objects.create(owner=outsider, day=now, model="m", runs=1, priced_cost=Decimal("7"))
    text = lead_client.get(change_url(eng)).content.decode()
    usage = text[text.index("<th>Member</th>") : text.index("</table>", text.index("<th>Member"))]
    rows = [row.split("</td><td>") for row in usage.split("<tr><td>")[1:]]
    cells = {row[0]: (row[1], row[2]) for row in rows}
    assert cells["All members"] == ("$1.25", "$3.75")
    assert cells["lead"] == ("$1.25", "$1.25")
    assert cells["bea"] == ("$0.00", "$2.50")
    assert "zed" not in cells


# ---- personal policies, tokens, identities --------------------------------------------------


def test_tokens_are_listed_without_their_secret_and_revoked_by_deleting(
    admin_client: Client, lead: User
) -> None:
    token, secret = services.create_token(user=lead, name="laptop")
    listed = admin_client.get(reverse("admin:teams_app_apitoken_changelist"))
    text = listed.content.decode()
    assert "laptop" in text and token.prefix in text
    assert secret not in text and token.digest not in text
    page = admin_client.get(reverse("admin:teams_app_apitoken_change", args=[token.pk]))
    assert page.status_code == 200 and token.digest not in page.content.decode()
    assert admin_client.get(reverse("admin:teams_app_apitoken_add")).status_code == 403
    delete = reverse("admin:teams_app_apitoken_delete", args=[token.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 302
    assert not ApiToken.objects.filter(pk=token.pk).exists()


def test_a_personal_policy_is_staffs_and_sign_in_identities_are_read_only(
    admin_client: Client, lead: User
) -> None:
    add = reverse("admin:teams_app_personalpolicy_add")
    page = admin_client.get(add)
    answer = admin_client.post(
        add, form_data(page, user=str(lead.pk), tools="read_file", note="on call")
    )
    assert answer.status_code == 302, errors(answer)
    own = PersonalPolicy.objects.get(user=lead)
    assert own.tools == ["read_file"] and own.note == "on call"
    identities = reverse("admin:teams_app_signinidentity_changelist")
    assert admin_client.get(identities).status_code == 200
    assert admin_client.get(reverse("admin:teams_app_signinidentity_add")).status_code == 403


def test_the_audit_log_is_in_the_admin_for_staff_read_only(admin_client: Client) -> None:
    services.create_team(slug="qa")
    listed = admin_client.get(reverse("admin:auditlog_logentry_changelist"))
    assert listed.status_code == 200
    assert "qa" in listed.content.decode() and listed.context["cl"].result_count >= 1
    assert admin_client.get(reverse("admin:auditlog_logentry_add")).status_code == 403
