"""The audit log over real HTTP (the site served on a socket): what staff do in the admin,
what people do with their tokens, sign-ins, memberships, named tokens, budgets lifted and
approvals answered are all in `GET /api/audit` with who did them; staff alone read it, by
actor, kind of object and time, newest first in pages."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from auditlog.context import set_actor
from django.contrib.auth.models import User
from django.test import RequestFactory
from django.utils import timezone
from rest_framework.authtoken.models import Token

from agentsite.audit_actor import AuditActorMiddleware
from sessions_app import runs as run_records
from sessions_app import services as session_services
from sessions_app.models import Approval, Run
from teams_app import services
from teams_app.models import ApiToken, PersonalPolicy, Team
from tests.llm_server import ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def site(live_server: Any, agent_settings: Any) -> str:
    return str(live_server.url)


@pytest.fixture
def root(db: None) -> User:
    return User.objects.create_superuser("root", password="pw-root-123")


@pytest.fixture
def ada(db: None) -> User:
    return User.objects.create_user("ada", password="pw-ada-123")


def token_of(user: User) -> str:
    return str(Token.objects.get_or_create(user=user)[0].key)


def api(site: str, user: User) -> httpx.Client:
    headers = {"Authorization": f"Token {token_of(user)}"}
    return httpx.Client(base_url=site, headers=headers, timeout=30)


@pytest.fixture
def staff_api(site: str, root: User) -> Iterator[httpx.Client]:
    with api(site, root) as client:
        yield client


class Browser:
    """A person at the site's pages: signs in through the login page, sends forms with
    their CSRF token."""

    def __init__(self, site: str) -> None:
        self.http = httpx.Client(base_url=site, timeout=30)

    def post(self, path: str, data: dict[str, Any]) -> httpx.Response:
        if "csrftoken" not in self.http.cookies:
            self.http.get(path)
        form = {**data, "csrfmiddlewaretoken": self.http.cookies["csrftoken"]}
        return self.http.post(path, data=form, headers={"Referer": str(self.http.base_url)})

    def sign_in(self, username: str, password: str) -> None:
        answer = self.post("/accounts/login/", {"username": username, "password": password})
        assert answer.status_code == 302, answer.text[:500]


@pytest.fixture
def staff_browser(site: str, root: User) -> Iterator[Browser]:
    browser = Browser(site)
    browser.sign_in("root", "pw-root-123")
    yield browser
    browser.http.close()


def entries(client: httpx.Client, **query: str) -> list[dict[str, Any]]:
    answer = client.get("/api/audit", params=query)
    assert answer.status_code == 200, answer.text
    return list(answer.json())


def team_form(**fields: Any) -> dict[str, Any]:
    """The admin's team form with nothing in it but `fields`."""
    return {
        "slug": "",
        "name": "",
        "approve_tools": "",
        "turn_rate": "",
        "exec_network": "unknown",
        "member_daily_budget": "",
        "team_daily_budget": "",
        **fields,
    }


def test_only_staff_read_the_audit_log(site: str, root: User, ada: User) -> None:
    with api(site, ada) as client:
        answer = client.get("/api/audit")
        assert answer.status_code == 403, answer.text
    assert httpx.get(f"{site}/api/audit", timeout=30).status_code in (401, 403)
    lead = User.objects.create_user("lead")
    team = services.create_team(slug="eng")
    services.set_admins(team=team, users=[lead])
    with api(site, lead) as client:
        assert client.get("/api/audit").status_code == 403


def test_a_sign_in_is_recorded_with_its_address(
    site: str, staff_api: httpx.Client, ada: User
) -> None:
    Browser(site).sign_in("ada", "pw-ada-123")
    (entry,) = entries(staff_api, actor="ada")
    assert entry["action"] == "access" and entry["actor"] == "ada"
    assert entry["object"] == {"type": "user", "id": str(ada.pk), "repr": "ada"}
    assert entry["changes"] == {"signed in": ["", "password"]}
    assert entry["remote_addr"] == "127.0.0.1"


def test_a_team_made_changed_and_deleted_in_the_admin_with_its_members(
    staff_browser: Browser, staff_api: httpx.Client, ada: User
) -> None:
    made = staff_browser.post(
        "/admin/teams_app/team/add/",
        team_form(slug="research", name="Research", members=[str(ada.pk)]),
    )
    assert made.status_code == 302, made.text[:2000]
    team = Team.objects.get(slug="research")
    page = f"/admin/teams_app/team/{team.pk}/change/"
    changed = staff_browser.post(page, team_form(name="Research", turn_rate="10/min"))
    assert changed.status_code == 302, changed.text[:2000]
    deleted = staff_browser.post(f"/admin/teams_app/team/{team.pk}/delete/", {"post": "yes"})
    assert deleted.status_code == 302

    logged = entries(staff_api, object="team")
    assert [(e["action"], e["actor"]) for e in logged] == [
        ("delete", "root"),
        ("update", "root"),
        ("create", "root"),
    ]
    assert logged[1]["changes"]["turn_rate"] == ["", "10/min"]
    assert logged[2]["changes"]["slug"] == ["None", "research"]
    assert {e["object"]["repr"] for e in logged} == {"Research"}

    memberships = entries(staff_api, object="user", actor="root")
    assert [
        (e["object"]["repr"], e["changes"]) for e in memberships if e["action"] != "access"
    ] == [
        ("ada", {"groups": [["research"], []]}),
        ("ada", {"groups": [[], ["research"]]}),
    ]


def test_a_change_made_with_a_token_names_its_maker(
    site: str, staff_api: httpx.Client, root: User
) -> None:
    services.create_team(slug="ops", name="Operations")
    answer = staff_api.patch("/api/teams/ops", json={"policy": {"turn_rate": "5/min"}})
    assert answer.status_code == 200, answer.text
    entry, made = entries(staff_api, object="team")
    assert made["action"] == "create" and made["actor"] is None  # made here, not over HTTP
    assert (
        entry["action"] == "update"
        and entry["actor"] == "root"
        and entry["changes"]["turn_rate"] == ["", "5/min"]
    )


def test_the_actor_is_found_from_the_token_before_drf_has_looked(root: User) -> None:
    """Any view that takes a token, DRF's or not: the middleware finds who it is when the
    change is logged, from the header, with the site's authentication classes."""

    def view(request: Any) -> Any:
        PersonalPolicy.objects.create(user=root, note="from a token")
        return None

    request = RequestFactory().post("/x", HTTP_AUTHORIZATION=f"Token {token_of(root)}")
    from django.contrib.auth.models import AnonymousUser

    request.user = AnonymousUser()
    AuditActorMiddleware(view)(request)
    from auditlog.models import LogEntry

    entry = LogEntry.objects.get(content_type__model="personalpolicy")
    assert entry.actor == root and entry.remote_addr == "127.0.0.1"

    wrong = RequestFactory().post("/x", HTTP_AUTHORIZATION="Token nonsense")
    wrong.user = AnonymousUser()
    PersonalPolicy.objects.all().delete()
    LogEntry.objects.all().delete()
    AuditActorMiddleware(view)(wrong)
    assert LogEntry.objects.get(content_type__model="personalpolicy").actor is None


def test_a_named_token_made_and_revoked_without_its_secret(
    staff_browser: Browser, staff_api: httpx.Client, ada: User
) -> None:
    with set_actor(ada):
        token, secret = services.create_token(user=ada, name="laptop")
    revoked = staff_browser.post(f"/admin/teams_app/apitoken/{token.pk}/delete/", {"post": "yes"})
    assert revoked.status_code == 302
    assert not ApiToken.objects.filter(pk=token.pk).exists()

    answer = staff_api.get("/api/audit", params={"object": "apitoken"})
    assert secret not in answer.text and token.digest not in answer.text
    deleted, made = answer.json()
    assert (made["action"], made["actor"], made["object"]["repr"]) == (
        "create",
        "ada",
        "ada: laptop",
    )
    assert made["changes"]["name"] == ["None", "laptop"] and "digest" not in made["changes"]
    assert (deleted["action"], deleted["actor"]) == ("delete", "root")


def test_a_budget_lifted_in_the_admin(
    staff_browser: Browser, staff_api: httpx.Client, ada: User
) -> None:
    answer = staff_browser.post(
        "/admin/sessions_app/userbudget/add/",
        {"user": str(ada.pk), "unlimited": "on", "daily_budget": ""},
    )
    assert answer.status_code == 302, answer.text[:2000]
    (entry,) = entries(staff_api, object="userbudget")
    assert entry["action"] == "create" and entry["actor"] == "root"
    assert entry["changes"]["unlimited"] == ["None", "True"]


def test_an_approval_answered_names_who_answered(
    site: str, staff_api: httpx.Client, ada: User, llm: ScriptedLLM
) -> None:
    llm.reply("Done.")
    session = session_services.get_or_create_session(key="api:deploys", owner=ada)
    run = run_records.start_new_run(session=session, channel="api", prompt="deploy", model="m")
    Run.objects.filter(pk=run.pk).update(status=Run.Status.WAITING)
    Approval.objects.create(
        run=run,
        call_id="call_1",
        name="exec",
        arguments={"command": "make deploy"},
        deadline=timezone.now() + timedelta(minutes=10),
    )
    with api(site, ada) as client:
        answer = client.post(
            f"/api/tasks/{run.pk}/approve",
            json={"call_id": "call_1", "allow": False, "wait": False},
        )
        assert answer.status_code in (200, 202), answer.text
    entry, asked = entries(staff_api, object="approval")
    assert asked["action"] == "create" and asked["actor"] is None
    assert entry["action"] == "update" and entry["actor"] == "ada"
    assert entry["changes"]["status"] == ["pending", "declined"]
    assert entry["changes"]["answered_by"] == ["None", str(ada.pk)]
    assert entry["remote_addr"] == "127.0.0.1"


def test_the_filters_and_the_pages(
    site: str, staff_api: httpx.Client, root: User, ada: User
) -> None:
    with set_actor(root):
        for number in range(3):
            services.create_team(slug=f"t{number}")
    with set_actor(ada):
        PersonalPolicy.objects.create(user=ada, note="mine")
    everything = entries(staff_api)
    assert [e["id"] for e in everything] == sorted((e["id"] for e in everything), reverse=True)
    assert {e["actor"] for e in entries(staff_api, actor="ada")} == {"ada"}
    assert [e["object"]["repr"] for e in entries(staff_api, object="team")] == ["t2", "t1", "t0"]
    assert entries(staff_api, object="teams_app.team") == entries(staff_api, object="team")

    later = (timezone.now() + timedelta(hours=1)).isoformat()
    assert entries(staff_api, since=later) == []
    assert len(entries(staff_api, since="2000-01-01")) == len(everything)
    bad = staff_api.get("/api/audit", params={"since": "last tuesday"})
    assert bad.status_code == 400 and "since" in json.dumps(bad.json())

    first = staff_api.get("/api/audit", params={"object": "team", "page_size": 2})
    assert [e["object"]["repr"] for e in first.json()] == ["t2", "t1"]
    link = re.search(r'<([^>]+)>; rel="next"', first.headers["Link"])
    assert link is not None
    second = staff_api.get(link.group(1))
    assert [e["object"]["repr"] for e in second.json()] == ["t0"]
