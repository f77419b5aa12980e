"""The door's endpoints: discovery, `/Users` and `/Groups`, and a SCIM 404 for any other
path under `/scim/v2/`. Plain (sync) views: each is a few queries."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse

from agent.doors.scim import discovery, groups, users
from agent.doors.scim.access import json_body, scim_view
from agent.doors.scim.errors import ScimError, not_found, scim_response
from agent.doors.scim.listing import by_pk, filtered, list_response, projected
from agent.doors.scim.patch import operations
from teams_app import services
from teams_app.models import Team

# ---- discovery -----------------------------------------------------------------------------


@scim_view("GET")
def service_provider_config(request: HttpRequest) -> HttpResponse:
    return scim_response(discovery.service_provider_config())


@scim_view("GET")
def resource_types(request: HttpRequest, name: str = "") -> HttpResponse:
    found = discovery.resource_types(request)
    if not name:
        return scim_response(discovery.listed(found))
    return scim_response(_one(found, name, "resource type"))


@scim_view("GET")
def schemas(request: HttpRequest, name: str = "") -> HttpResponse:
    found = discovery.schemas(request)
    if not name:
        return scim_response(discovery.listed(found))
    return scim_response(_one(found, name, "schema"))


def _one(found: list[dict[str, Any]], name: str, kind: str) -> dict[str, Any]:
    for item in found:
        if item["id"] == name:
            return item
    raise not_found(kind, name)


@scim_view("GET", "POST", "PUT", "PATCH", "DELETE")
def unknown(request: HttpRequest, rest: str = "") -> HttpResponse:
    raise ScimError(404, f"no such endpoint: /{rest}")


# ---- users ---------------------------------------------------------------------------------


def _user(ident: str) -> User:
    found = users.scim_users().filter(by_pk(ident)).first()
    if found is None:
        raise not_found("user", ident)
    return found


def _created(resource: dict[str, Any]) -> HttpResponse:
    location = str(resource["meta"]["location"])
    return scim_response(resource, status=201, headers={"Location": location})


@scim_view("GET", "POST")
def user_list(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        person = users.person_from(json_body(request))
        user = users.save_person(person)
        return _created(users.user_resource(request, user))
    found = filtered(request, users.scim_users(), users.USER_FILTERS).distinct()
    return scim_response(
        list_response(request, found, lambda user: users.user_resource(request, user))
    )


@scim_view("GET", "PUT", "PATCH", "DELETE")
def user_detail(request: HttpRequest, ident: str) -> HttpResponse:
    user = _user(ident)
    if request.method == "PUT":
        # Replaced; an `active` left out leaves the account as it was (a PUT never
        # reactivates anyone by omission).
        person = users.person_from(json_body(request), active=user.is_active)
        users.save_person(person, user)
    elif request.method == "PATCH":
        person = users.person_of(user)
        for operation in operations(json_body(request)):
            person = users.apply(person, operation)
        users.save_person(person, user)
    elif request.method == "DELETE":
        # Deactivated, not deleted: their chats, runs and history stay.
        users.save_person(replace(users.person_of(user), active=False), user)
        return scim_response(status=204)
    user.refresh_from_db()
    return scim_response(projected(request, users.user_resource(request, user)))


# ---- groups --------------------------------------------------------------------------------


def _team(ident: str) -> Team:
    found = groups.teams().filter(by_pk(ident)).first()
    if found is None:
        raise not_found("group", ident)
    return found


@scim_view("GET", "POST")
def group_list(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        body = json_body(request)
        members = groups.member_ids(body.get("members") or [])
        team = groups.create_group(body.get("displayName"), members)
        return _created(groups.group_resource(request, team))
    found = filtered(request, groups.teams(), groups.GROUP_FILTERS).distinct()
    return scim_response(
        list_response(request, found, lambda team: groups.group_resource(request, team))
    )


@scim_view("GET", "PUT", "PATCH", "DELETE")
def group_detail(request: HttpRequest, ident: str) -> HttpResponse:
    team = _team(ident)
    if request.method == "PUT":
        body = json_body(request)
        groups.rename(team, body.get("displayName"))
        groups.set_members(team, groups.member_ids(body.get("members") or []))
    elif request.method == "PATCH":
        for operation in operations(json_body(request)):
            groups.apply(team, operation)
    elif request.method == "DELETE":
        services.delete_team(team=team)
        return scim_response(status=204)
    team = _team(ident)
    return scim_response(projected(request, groups.group_resource(request, team)))
