"""Lists: the `filter` a provider sends to find one resource, `startIndex` and `count`, the
`attributes` and `excludedAttributes` it asks for, and the ListResponse (RFC 7644 §3.4.2).

Only equality is understood, alone or joined with `and` (`userName eq "ada@example.org"`,
`displayName eq "Sales"`, `id eq "3" and members eq "7"`): it is all that Entra ID and Okta
send. Anything else is answered with `invalidFilter`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from django.db.models import Q, QuerySet
from django.http import HttpRequest

from agent.doors.scim.errors import INVALID_FILTER, INVALID_VALUE, ScimError

LIST_RESPONSE = "urn:ietf:params:scim:api:messages:2.0:ListResponse"
DEFAULT_COUNT = 100
MAX_COUNT = 200

_TERM = re.compile(
    r"""\s*(?P<attr>[A-Za-z][\w.:$-]*)\s+eq\s+
    (?:"(?P<text>(?:[^"\\]|\\.)*)"|(?P<word>true|false|null|-?\d+(?:\.\d+)?))\s*""",
    re.IGNORECASE | re.VERBOSE,
)
_AND = re.compile(r"\s+and\s+", re.IGNORECASE)

# An attribute's name (lower case) → the condition "it equals this value" on the queryset.
Conditions = dict[str, Callable[[str], Q]]


def pk_of(ident: str) -> int | None:
    """The database id a SCIM id names, or None for one that names nothing here."""
    ident = ident.strip()
    if ident.isascii() and ident.isdigit() and len(ident) <= 18:
        return int(ident)
    return None


def pks_of(idents: Iterable[str]) -> set[int]:
    return {number for number in map(pk_of, idents) if number is not None}


def by_pk(ident: str, field: str = "pk") -> Q:
    number = pk_of(ident)
    return Q(**{field: number}) if number is not None else Q(pk__in=[])


def equalities(text: str) -> list[tuple[str, str]]:
    """`attr eq "value"` terms joined with `and`: each (attr in lower case, value)."""
    terms: list[tuple[str, str]] = []
    rest = text.strip()
    while True:
        match = _TERM.match(rest)
        if match is None:
            raise ScimError(400, f"unsupported filter: {text!r}", scim_type=INVALID_FILTER)
        value = match["text"] if match["text"] is not None else match["word"]
        terms.append((match["attr"].lower(), re.sub(r"\\(.)", r"\1", value)))
        rest = rest[match.end() :]
        if not rest:
            return terms
        joined = _AND.match(" " + rest)
        if joined is None:
            raise ScimError(400, f"unsupported filter: {text!r}", scim_type=INVALID_FILTER)
        rest = (" " + rest)[joined.end() :]


def filtered(request: HttpRequest, found: QuerySet[Any], conditions: Conditions) -> QuerySet[Any]:
    text = request.GET.get("filter", "").strip()
    if not text:
        return found
    for attr, value in equalities(text):
        attr = attr.rsplit(":", 1)[-1] if attr.startswith("urn:") else attr
        if attr not in conditions:
            raise ScimError(400, f"cannot filter on {attr}", scim_type=INVALID_FILTER)
        found = found.filter(conditions[attr](value))
    return found


def _number(request: HttpRequest, name: str, default: int) -> int:
    raw = request.GET.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ScimError(400, f"{name} must be an integer", scim_type=INVALID_VALUE) from None


def page(request: HttpRequest, found: QuerySet[Any]) -> tuple[Sequence[Any], int, int]:
    """The page asked for: its resources, the total, and its 1-based start (a start below 1
    is 1, a count below 0 is 0, as RFC 7644 §3.4.2.4 says)."""
    start = max(_number(request, "startIndex", 1), 1)
    count = min(max(_number(request, "count", DEFAULT_COUNT), 0), MAX_COUNT)
    total = found.count()
    return list(found[start - 1 : start - 1 + count]), total, start


def projected(request: HttpRequest, resource: dict[str, Any]) -> dict[str, Any]:
    """`resource` with only the `attributes` asked for, or without the `excludedAttributes`
    (top-level names; `id`, `schemas` and `meta` always stay)."""
    always = {"id", "schemas", "meta"}

    def names(param: str) -> set[str]:
        listed = request.GET.get(param, "")
        return {n.strip().rsplit(":", 1)[-1].split(".")[0].lower() for n in listed.split(",")} - {
            ""
        }

    wanted, dropped = names("attributes"), names("excludedAttributes")
    kept = {}
    for key, value in resource.items():
        name = key.lower()
        if name in always or ((not wanted or name in wanted) and name not in dropped):
            kept[key] = value
    return kept


def list_response(
    request: HttpRequest, found: QuerySet[Any], resource: Callable[[Any], dict[str, Any]]
) -> dict[str, Any]:
    items, total, start = page(request, found)
    return {
        "schemas": [LIST_RESPONSE],
        "totalResults": total,
        "startIndex": start,
        "itemsPerPage": len(items),
        "Resources": [projected(request, resource(item)) for item in items],
    }
