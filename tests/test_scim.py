"""SCIM 2.0 provisioning at /scim/v2/, as Microsoft Entra ID and Okta use it: people made,
found by their userName, changed, deactivated (by a PATCH or a DELETE), groups pushed as
teams and their members set (`test_scim_live.py`: what a deactivation does to the person's
open chat and their API token, on a real server)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from auditlog.models import LogEntry
from django.contrib.auth.models import Group, User
from django.db.models.signals import pre_save
from django.test import Client

from teams_app.models import SignInIdentity, Team

pytestmark = pytest.mark.django_db

TOKEN = "scim-test-token-0123456789"
BASE = "/scim/v2"
SCIM_JSON = "application/scim+json"
USER = "urn:ietf:params:scim:schemas:core:2.0:User"
GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group"
PATCH_OP = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
ERROR = "urn:ietf:params:scim:api:messages:2.0:Error"
ENTERPRISE = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"


class Scim:
    """A SCIM client as a provider is one: the bearer token, JSON bodies."""

    def __init__(self, client: Client, token: str | None = TOKEN) -> None:
        self.client = client
        self.headers = {"authorization": f"Bearer {token}"} if token else {}

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body) if body is not None else ""
        return self.client.generic(
            method, BASE + path, data, content_type=SCIM_JSON, headers=self.headers
        )

    def get(self, path: str) -> Any:
        return self.call("GET", path)

    def post(self, path: str, body: Any) -> Any:
        return self.call("POST", path, body)

    def patch(self, path: str, *operations: dict[str, Any]) -> Any:
        return self.call("PATCH", path, {"schemas": [PATCH_OP], "Operations": list(operations)})


@pytest.fixture
def scim(settings: Any) -> Scim:
    settings.AGENT_SCIM_TOKEN = TOKEN
    return Scim(Client())


def entra_user(name: str = "ada@example.org", external: str = "ada") -> dict[str, Any]:
    """A user as Entra ID's provisioning creates one."""
    return {
        "schemas": [USER, ENTERPRISE],
        "externalId": external,
        "userName": name,
        "active": True,
        "displayName": "Ada Lovelace",
        "emails": [{"primary": True, "type": "work", "value": name}],
        "meta": {"resourceType": "User"},
        "name": {"formatted": "Ada Lovelace", "familyName": "Lovelace", "givenName": "Ada"},
        "roles": [],
        ENTERPRISE: {"department": "Engines"},
    }


def okta_user(name: str = "grace@example.org") -> dict[str, Any]:
    """A user as Okta's provisioning creates one (no externalId, a password it may sync)."""
    return {
        "schemas": [USER],
        "userName": name,
        "name": {"givenName": "Grace", "familyName": "Hopper"},
        "emails": [{"primary": True, "value": name, "type": "work"}],
        "displayName": "Grace Hopper",
        "locale": "en-US",
        "groups": [],
        "password": "okta-sent-this-1A",
        "active": True,
    }


def error_of(response: Any, status: int, scim_type: str | None = None) -> str:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == SCIM_JSON
    body = response.json()
    assert body["schemas"] == [ERROR] and body["status"] == str(status)
    assert body.get("scimType") == scim_type
    return str(body["detail"])


# ---- the door's access ---------------------------------------------------------------------


@pytest.mark.parametrize("token", ["", None])
def test_without_a_scim_token_every_scim_url_is_a_404(settings: Any, token: str | None) -> None:
    settings.AGENT_SCIM_TOKEN = token or ""
    for client in (Scim(Client()), Scim(Client(), token=None)):
        for method, path in [
            ("GET", "/ServiceProviderConfig"),
            ("GET", "/Users"),
            ("POST", "/Users"),
            ("PATCH", "/Users/1"),
            ("GET", "/Groups"),
            ("GET", "/anything/else"),
        ]:
            error_of(client.call(method, path, {}), 404)
    assert not User.objects.exists()


def test_a_wrong_or_missing_bearer_token_is_a_401_and_changes_nothing(scim: Scim) -> None:
    for headers in [
        {},
        {"authorization": "Bearer not-the-token"},
        {"authorization": f"Bearer {TOKEN[:-1]}"},
        {"authorization": f"Basic {TOKEN}"},
        {"authorization": TOKEN},
    ]:
        scim.headers = headers
        response = scim.post("/Users", okta_user())
        error_of(response, 401)
        assert response["WWW-Authenticate"].startswith("Bearer")
    assert not User.objects.exists()


def test_a_staff_login_session_is_no_way_in(scim: Scim) -> None:
    admin = User.objects.create_superuser("root", "", "root-pass-123")
    scim.client.force_login(admin)
    scim.headers = {}
    error_of(scim.get("/Users"), 401)


def test_the_discovery_endpoints_describe_users_and_groups(scim: Scim) -> None:
    config = scim.get("/ServiceProviderConfig")
    assert config.status_code == 200 and config["Content-Type"] == SCIM_JSON
    assert config.json()["patch"] == {"supported": True}
    assert config.json()["authenticationSchemes"][0]["type"] == "oauthbearertoken"
    types = scim.get("/ResourceTypes").json()
    assert {(t["name"], t["endpoint"]) for t in types["Resources"]} == {
        ("User", "/Users"),
        ("Group", "/Groups"),
    }
    schemas = scim.get("/Schemas").json()
    assert {s["id"] for s in schemas["Resources"]} == {USER, GROUP}
    user_schema = scim.get(f"/Schemas/{USER}").json()
    assert "userName" in {attribute["name"] for attribute in user_schema["attributes"]}
    error_of(scim.get("/Schemas/urn:nothing"), 404)


# ---- people --------------------------------------------------------------------------------


def test_entra_creates_finds_changes_and_deactivates_a_person(scim: Scim) -> None:
    # Entra ID looks the person up first, creates them when the filter finds nobody.
    found = scim.get('/Users?filter=userName eq "ada@example.org"')
    assert found.status_code == 200
    assert found.json()["totalResults"] == 0 and found.json()["Resources"] == []

    created = scim.post("/Users", entra_user())
    assert created.status_code == 201, created.content
    ada = created.json()
    user = User.objects.get(username="ada@example.org")
    assert ada["id"] == str(user.pk) and ada["externalId"] == "ada"
    assert created["Location"].endswith(f"/scim/v2/Users/{user.pk}")
    assert (user.first_name, user.last_name, user.email) == ("Ada", "Lovelace", "ada@example.org")
    assert user.is_active and not user.has_usable_password()
    identity = SignInIdentity.objects.get(user=user)
    assert (identity.provider, identity.issuer, identity.subject) == ("scim", "scim", "ada")

    for query in ['userName eq "Ada@Example.org"', 'externalId eq "ada"']:
        listed = scim.get(f"/Users?filter={query}").json()
        assert [u["id"] for u in listed["Resources"]] == [ada["id"]], query

    changed = scim.patch(
        f"/Users/{ada['id']}",
        {"op": "Replace", "path": "name.givenName", "value": "Augusta Ada"},
        {"op": "Add", "path": 'emails[type eq "work"].value', "value": "ada@engines.example"},
        {"op": "Replace", "path": f"{ENTERPRISE}:department", "value": "Analytics"},
        {"op": "Replace", "path": "displayName", "value": "Augusta Ada Lovelace"},
    )
    assert changed.status_code == 200, changed.content
    assert changed.json()["name"]["givenName"] == "Augusta Ada"
    assert changed.json()["emails"][0]["value"] == "ada@engines.example"

    # Entra's deactivation: a capitalised op, and "False" as a string.
    off = scim.patch(f"/Users/{ada['id']}", {"op": "Replace", "path": "active", "value": "False"})
    assert off.status_code == 200 and off.json()["active"] is False
    assert not User.objects.get(pk=user.pk).is_active

    updates = LogEntry.objects.get_for_object(user).filter(action=LogEntry.Action.UPDATE)
    entry = updates.filter(changes__has_key="is_active").get()
    assert entry.changes["is_active"] == ["True", "False"]
    assert entry.actor is None and entry.actor_email == "scim" and entry.cid == "scim"
    assert entry.remote_addr == "127.0.0.1"
    assert entry.additional_data == {"via": "scim"}


def test_the_requests_that_mark_the_audit_log_leave_no_signal_receiver_behind(scim: Scim) -> None:
    scim.post("/Users", okta_user())
    before = len(pre_save.receivers)
    for number in range(3):
        scim.post("/Groups", {"displayName": f"Team {number}"})
    assert len(pre_save.receivers) == before
    assert LogEntry.objects.filter(cid="scim", object_repr="Team 2").exists()


def test_okta_creates_a_person_and_deactivates_them_with_a_value_object(scim: Scim) -> None:
    grace = scim.post("/Users", okta_user()).json()
    user = User.objects.get(pk=int(grace["id"]))
    assert "externalId" not in grace
    assert not user.has_usable_password()  # the password Okta sent is not kept

    off = scim.patch(f"/Users/{grace['id']}", {"op": "replace", "value": {"active": False}})
    assert off.status_code == 200 and off.json()["active"] is False
    user.refresh_from_db()
    assert not user.is_active

    back = scim.patch(
        f"/Users/{grace['id']}",
        {"op": "replace", "value": {"active": True, "name.familyName": "Murray Hopper"}},
    )
    assert back.json()["active"] is True and back.json()["name"]["familyName"] == "Murray Hopper"

    # Okta's profile update: the whole user, by PUT; userName changes too.
    body = {**okta_user("grace.hopper@example.org"), "id": grace["id"]}
    body["name"] = {"givenName": "Grace B.", "familyName": "Hopper"}
    put = scim.call("PUT", f"/Users/{grace['id']}", body)
    assert put.status_code == 200, put.content
    user.refresh_from_db()
    assert (user.username, user.first_name) == ("grace.hopper@example.org", "Grace B.")


def test_deleting_a_person_deactivates_them_and_keeps_their_account(scim: Scim) -> None:
    ada = scim.post("/Users", entra_user()).json()
    deleted = scim.call("DELETE", f"/Users/{ada['id']}")
    assert deleted.status_code == 204 and deleted.content == b""
    user = User.objects.get(pk=int(ada["id"]))
    assert not user.is_active
    assert scim.get(f"/Users/{ada['id']}").json()["active"] is False
    error_of(scim.get("/Users/999999"), 404)
    error_of(scim.call("DELETE", "/Users/not-a-number"), 404)


def test_a_userName_or_externalId_taken_is_a_409_uniqueness(scim: Scim) -> None:
    ada = scim.post("/Users", entra_user()).json()
    error_of(scim.post("/Users", entra_user("ADA@example.org", "other")), 409, "uniqueness")
    error_of(scim.post("/Users", entra_user("ada2@example.org", "ada")), 409, "uniqueness")
    scim.post("/Users", okta_user())
    renamed = scim.patch(
        f"/Users/{ada['id']}", {"op": "replace", "path": "userName", "value": "grace@example.org"}
    )
    error_of(renamed, 409, "uniqueness")
    assert User.objects.filter(username="ada@example.org").exists()


def test_superusers_are_out_of_a_providers_reach(scim: Scim) -> None:
    root = User.objects.create_superuser("root@example.org", "", "root-pass-123")
    assert scim.get('/Users?filter=userName eq "root@example.org"').json()["totalResults"] == 0
    error_of(scim.patch(f"/Users/{root.pk}", {"op": "replace", "value": {"active": False}}), 404)
    error_of(scim.post("/Users", okta_user("root@example.org")), 409, "uniqueness")
    root.refresh_from_db()
    assert root.is_active


def test_the_list_pages_by_startIndex_and_count(scim: Scim) -> None:
    for number in range(5):
        scim.post("/Users", okta_user(f"p{number}@example.org"))
    page = scim.get("/Users?startIndex=2&count=2").json()
    assert (page["totalResults"], page["startIndex"], page["itemsPerPage"]) == (5, 2, 2)
    assert [u["userName"] for u in page["Resources"]] == ["p1@example.org", "p2@example.org"]
    assert scim.get("/Users?count=0").json()["Resources"] == []
    narrow = scim.get("/Users?count=1&attributes=userName").json()["Resources"][0]
    assert set(narrow) == {"schemas", "id", "userName", "meta"}
    error_of(scim.get('/Users?filter=userName co "p"'), 400, "invalidFilter")
    error_of(scim.get('/Users?filter=title eq "x"'), 400, "invalidFilter")


@pytest.mark.parametrize(
    ("body", "scim_type"),
    [
        ({"Operations": [{"op": "replace", "path": "active", "value": False}]}, "invalidSyntax"),
        ({"schemas": [PATCH_OP]}, "invalidSyntax"),
        (
            {"schemas": [PATCH_OP], "Operations": [{"op": "move", "path": "active"}]},
            "invalidSyntax",
        ),
        ({"schemas": [PATCH_OP], "Operations": ["replace"]}, "invalidSyntax"),
        ({"schemas": [PATCH_OP], "Operations": [{"op": "replace", "value": "x"}]}, "invalidValue"),
        (
            {
                "schemas": [PATCH_OP],
                "Operations": [{"op": "replace", "path": "active", "value": 2}],
            },
            "invalidValue",
        ),
        (
            {"schemas": [PATCH_OP], "Operations": [{"op": "replace", "path": "a b", "value": 1}]},
            "invalidPath",
        ),
        ({"schemas": [PATCH_OP], "Operations": [{"op": "remove"}]}, "noTarget"),
    ],
)
def test_a_malformed_patch_is_a_400_and_changes_nothing(
    scim: Scim, body: dict[str, Any], scim_type: str
) -> None:
    ada = scim.post("/Users", entra_user()).json()
    body = {**body}
    if "Operations" in body:  # a good operation first: none of the request's may stand
        body["Operations"] = [
            {"op": "replace", "path": "active", "value": False},
            *body["Operations"],
        ]
    error_of(scim.call("PATCH", f"/Users/{ada['id']}", body), 400, scim_type)
    assert User.objects.get(pk=int(ada["id"])).is_active


def test_a_body_that_is_no_json_object_is_a_400_invalidSyntax(scim: Scim) -> None:
    bad = scim.client.post(f"{BASE}/Users", "{not json", SCIM_JSON, headers=scim.headers)
    error_of(bad, 400, "invalidSyntax")
    error_of(scim.post("/Users", ["a list"]), 400, "invalidSyntax")
    error_of(scim.post("/Users", {"userName": ""}), 400, "invalidValue")
    error_of(scim.post("/Users", {"userName": "has space"}), 400, "invalidValue")


# ---- groups, which are teams ---------------------------------------------------------------


def member_names(team: Team) -> set[str]:
    return set(team.group.user_set.values_list("username", flat=True))


def test_a_pushed_group_is_a_team_whose_members_the_provider_sets(scim: Scim) -> None:
    ada = scim.post("/Users", entra_user()).json()
    grace = scim.post("/Users", okta_user()).json()
    query = '/Groups?excludedAttributes=members&filter=displayName eq "Sales Team"'
    assert scim.get(query).json()["totalResults"] == 0

    created = scim.post("/Groups", {"schemas": [GROUP], "displayName": "Sales Team", "members": []})
    assert created.status_code == 201, created.content
    group = created.json()
    team = Team.objects.get(pk=int(group["id"]))
    assert (team.slug, team.name, team.group.name) == ("sales-team", "Sales Team", "sales-team")
    assert not team.synced  # its members are the provider's pushes, not a sign-in's claim
    assert (team.allowed_models, team.tools, team.turn_rate, team.exec_network) == (
        None,
        None,
        "",
        None,
    )
    found = scim.get(query).json()["Resources"]
    assert [(g["id"], g["displayName"]) for g in found] == [(group["id"], "Sales Team")]
    assert "members" not in found[0]

    # Okta adds; Entra ID adds with a capitalised op.
    path = f"/Groups/{group['id']}"
    scim.patch(path, {"op": "add", "path": "members", "value": [{"value": ada["id"]}]})
    scim.patch(
        path, {"op": "Add", "path": "members", "value": [{"$ref": None, "value": grace["id"]}]}
    )
    assert member_names(team) == {"ada@example.org", "grace@example.org"}
    members = scim.get(path).json()["members"]
    assert {m["value"] for m in members} == {ada["id"], grace["id"]}
    assert scim.get(f"/Users/{ada['id']}").json()["groups"][0]["display"] == "Sales Team"
    listed = scim.get(f'/Groups?filter=id eq "{group["id"]}" and members eq "{ada["id"]}"')
    assert listed.json()["totalResults"] == 1

    # Okta removes by a filtered path; Entra ID names the member in the value.
    scim.patch(path, {"op": "remove", "path": f'members[value eq "{ada["id"]}"]'})
    assert member_names(team) == {"grace@example.org"}
    scim.patch(path, {"op": "Remove", "path": "members", "value": [{"value": grace["id"]}]})
    assert member_names(team) == set()
    scim.patch(path, {"op": "replace", "path": "members", "value": [{"value": ada["id"]}]})
    assert member_names(team) == {"ada@example.org"}
    bad = scim.patch(path, {"op": "add", "path": "members", "value": [{"value": "999999"}]})
    error_of(bad, 400, "invalidValue")
    assert member_names(team) == {"ada@example.org"}

    # Each change is recorded on the person it changed (`teams_app.audit`), with SCIM's mark.
    people = {str(user.pk): user.username for user in team.group.user_set.model.objects.all()}
    entries = LogEntry.objects.filter(actor=None, cid="scim", changes__has_key="groups")
    changes = [
        (people[entry.object_pk], entry.changes["groups"]) for entry in entries.order_by("pk")
    ]
    assert [(who, c["operation"], c["objects"]) for who, c in changes] == [
        ("ada@example.org", "add", ["sales-team"]),
        ("grace@example.org", "add", ["sales-team"]),
        ("ada@example.org", "delete", ["sales-team"]),
        ("grace@example.org", "delete", ["sales-team"]),
        ("ada@example.org", "add", ["sales-team"]),
    ]


def test_a_renamed_group_renames_its_team_and_a_deleted_one_goes(scim: Scim) -> None:
    group = scim.post("/Groups", {"schemas": [GROUP], "displayName": "Sales"}).json()
    path = f"/Groups/{group['id']}"
    # Entra ID renames with a path, Okta with a value object that repeats the id.
    renamed = scim.patch(path, {"op": "Replace", "path": "displayName", "value": "Sales EMEA"})
    assert renamed.status_code == 200 and renamed.json()["displayName"] == "Sales EMEA"
    team = Team.objects.get(pk=int(group["id"]))
    assert (team.slug, team.group.name) == ("sales-emea", "sales-emea")
    scim.patch(path, {"op": "replace", "value": {"id": group["id"], "displayName": "Field Sales"}})
    team.refresh_from_db()
    assert (team.slug, team.name) == ("field-sales", "Field Sales")
    assert scim.get('/Groups?filter=displayName eq "Field Sales"').json()["totalResults"] == 1

    error_of(scim.post("/Groups", {"displayName": "Field  sales"}), 409, "uniqueness")
    other = scim.post("/Groups", {"displayName": "Support"}).json()
    taken = scim.patch(path, {"op": "replace", "path": "displayName", "value": "support"})
    error_of(taken, 409, "uniqueness")
    ada = scim.post("/Users", entra_user()).json()
    put = scim.call(
        "PUT",
        f"/Groups/{other['id']}",
        {"displayName": "Help Desk", "members": [{"value": ada["id"]}]},
    )
    assert put.status_code == 200 and [m["value"] for m in put.json()["members"]] == [ada["id"]]

    assert scim.call("DELETE", path).status_code == 204
    assert not Team.objects.filter(pk=team.pk).exists()
    assert not Group.objects.filter(name="field-sales").exists()
    error_of(scim.get(path), 404)
    assert User.objects.filter(pk=int(ada["id"])).exists()  # members keep their accounts
    error_of(scim.post("/Groups", {"displayName": "!!!"}), 400, "invalidValue")
