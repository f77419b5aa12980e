"""A person as SCIM sees them: the Django user (`id` its pk), their `externalId` kept as a
sign-in identity (issuer and provider "scim"), and the attributes this site keeps
(`userName`, `name.givenName`, `name.familyName`, one e-mail address, `active`). Whatever
else a provider sends (a phone number, a title, Entra ID's enterprise extension) is
accepted and not kept.

Superusers are none of SCIM's business: a provider neither sees, nor changes, nor
deactivates the site's own administrators, even one whose name it also uses.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

from django.contrib.auth.models import User
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.urls import reverse

from agent.doors.scim.errors import invalid_value, taken
from agent.doors.scim.listing import Conditions, by_pk
from agent.doors.scim.patch import Operation, Path, boolean
from teams_app.models import SignInIdentity, Team
from teams_app.selectors import PROVISIONED

logger = logging.getLogger(__name__)

USER_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:User"
# The issuer and the provider of the identities that hold an externalId.
SCIM = PROVISIONED


def scim_users() -> QuerySet[User]:
    return User.objects.filter(is_superuser=False).order_by("pk")


USER_FILTERS: Conditions = {
    "username": lambda value: Q(username__iexact=value),
    "externalid": lambda value: Q(
        sign_in_identities__issuer=SCIM, sign_in_identities__subject=value
    ),
    "id": by_pk,
    "emails": lambda value: Q(email__iexact=value),
    "emails.value": lambda value: Q(email__iexact=value),
}


@dataclass(frozen=True, slots=True)
class Person:
    """What SCIM may change of a user."""

    user_name: str
    given_name: str = ""
    family_name: str = ""
    email: str = ""
    active: bool = True
    external_id: str | None = None


def external_id(user: User) -> str | None:
    """The provider's id of `user`: the identity's subject, unless that is only their
    userName (which stands in for an externalId the provider never sent)."""
    identity = SignInIdentity.objects.filter(user=user, issuer=SCIM).first()
    if identity is None or identity.subject == user.username:
        return None
    return identity.subject


def person_of(user: User) -> Person:
    return Person(
        user_name=user.username,
        given_name=user.first_name,
        family_name=user.last_name,
        email=user.email,
        active=user.is_active,
        external_id=external_id(user),
    )


def user_resource(request: HttpRequest, user: User) -> dict[str, Any]:
    person = person_of(user)
    full = " ".join(part for part in (person.given_name, person.family_name) if part)
    resource: dict[str, Any] = {"schemas": [USER_SCHEMA], "id": str(user.pk)}
    if person.external_id:
        resource["externalId"] = person.external_id
    resource.update(
        userName=person.user_name,
        name={"givenName": person.given_name, "familyName": person.family_name, "formatted": full},
        displayName=full or person.user_name,
        active=person.active,
        emails=[{"value": person.email, "type": "work", "primary": True}] if person.email else [],
        groups=[
            {"value": str(team.pk), "display": team.name, "type": "direct"}
            for team in Team.objects.filter(group__user=user)
        ],
        meta={
            "resourceType": "User",
            "created": user.date_joined.isoformat(),
            "location": request.build_absolute_uri(reverse("scim-user", args=[user.pk])),
        },
    )
    return resource


# ---- reading what a provider sends -----------------------------------------------------------


def _text(value: Any, name: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise invalid_value(f"{name} must be a string")
    return value.strip()


def _primary_email(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise invalid_value("emails must be a list of objects")
    primary = [item for item in value if item.get("primary") in (True, "true", "True")]
    chosen: dict[str, Any] = (primary or value or [{}])[0]
    return _text(chosen.get("value"), "emails.value")


def person_from(body: dict[str, Any], *, active: bool = True) -> Person:
    """The person a POST or PUT body describes (`active` when it does not say)."""
    lowered = {str(key).lower(): value for key, value in body.items()}
    name = lowered.get("name") or {}
    if not isinstance(name, dict):
        raise invalid_value("name must be an object")
    names = {str(key).lower(): value for key, value in name.items()}
    external = _text(lowered.get("externalid"), "externalId") or None
    return Person(
        user_name=_text(lowered.get("username"), "userName"),
        given_name=_text(names.get("givenname"), "name.givenName"),
        family_name=_text(names.get("familyname"), "name.familyName"),
        email=_primary_email(lowered.get("emails")),
        active=boolean(lowered["active"], "active") if "active" in lowered else active,
        external_id=external,
    )


def _name_part(person: Person, sub: str, value: Any, remove: bool) -> Person:
    if sub == "givenname":
        return replace(person, given_name="" if remove else _text(value, "name.givenName"))
    if sub == "familyname":
        return replace(person, family_name="" if remove else _text(value, "name.familyName"))
    return person  # formatted, middleName, honorificPrefix…: not kept


def apply(person: Person, operation: Operation) -> Person:
    """`person` after one PATCH operation."""
    path: Path = operation.path  # type: ignore[assignment]
    remove, value = operation.op == "remove", operation.value
    if path.attr == "username":
        if remove:
            raise invalid_value("userName cannot be removed")
        return replace(person, user_name=_text(value, "userName"))
    if path.attr == "active":
        return person if remove else replace(person, active=boolean(value, "active"))
    if path.attr == "externalid":
        return replace(person, external_id=None if remove else _text(value, "externalId") or None)
    if path.attr == "name" and path.sub:
        return _name_part(person, path.sub, value, remove)
    if path.attr == "name":
        if remove or value is None:
            return replace(person, given_name="", family_name="")
        if not isinstance(value, dict):
            raise invalid_value("name must be an object")
        for key, item in value.items():
            person = _name_part(person, str(key).lower(), item, remove=False)
        return person
    if path.attr == "emails":
        if remove:
            return replace(person, email="")
        if path.sub == "value" or isinstance(value, str):
            return replace(person, email=_text(value, "emails.value"))
        if path.sub:
            return person  # the address's type or primary flag: there is only the one
        return replace(person, email=_primary_email(value))
    logger.debug("SCIM %s of %s on a user: not kept here", operation.op, path.attr)
    return person


# ---- writing -------------------------------------------------------------------------------


def _check(person: Person) -> None:
    if not person.user_name:
        raise invalid_value("userName is required")
    if len(person.user_name) > 150:
        raise invalid_value("userName may be 150 characters at most")
    try:
        UnicodeUsernameValidator()(person.user_name)
        if person.email:
            validate_email(person.email)
    except ValidationError as exc:
        raise invalid_value(" ".join(exc.messages)) from None
    if len(person.given_name) > 150 or len(person.family_name) > 150:
        raise invalid_value("name.givenName and name.familyName may be 150 characters at most")


def save_person(person: Person, user: User | None = None) -> User:
    """`user` (a new one if None) made to be `person`; saved only if something changed."""
    _check(person)
    others = User.objects.exclude(pk=user.pk) if user else User.objects.all()
    if others.filter(username__iexact=person.user_name).exists():
        raise taken(f"a user named {person.user_name} exists already")
    subject = person.external_id or person.user_name
    holders = SignInIdentity.objects.filter(issuer=SCIM, subject=subject)
    if user is not None:
        holders = holders.exclude(user=user)
    if holders.exists():
        raise taken(f"another user has the externalId {subject}")
    if user is None:
        user = User(username=person.user_name)
        user.set_unusable_password()  # they sign in through the provider
    fields = {
        "username": person.user_name,
        "first_name": person.given_name,
        "last_name": person.family_name,
        "email": person.email,
        "is_active": person.active,
    }
    if user.pk is None or any(getattr(user, key) != value for key, value in fields.items()):
        for key, value in fields.items():
            setattr(user, key, value)
        user.save()  # as the admin saves it: a deactivation closes the person's sockets
    SignInIdentity.objects.update_or_create(
        user=user, issuer=SCIM, defaults={"provider": SCIM, "subject": subject}
    )
    return user
