"""PatchOp requests (RFC 7644 §3.5.2), read into plain operations that the users' and the
groups' modules apply.

What providers actually send is accepted: op names in any case (Entra ID's "Replace"),
a `path` with a value filter (`emails[type eq "work"].value`, `members[value eq "7"]`),
no path and a value object whose keys are attribute names, nested (`{"name": {"givenName":
"Ada"}}`) or dotted (`{"name.givenName": "Ada"}`, as Entra ID sends them), and attribute
names in any case or with their schema's URN in front.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from agent.doors.scim.errors import (
    INVALID_PATH,
    NO_TARGET,
    ScimError,
    invalid_syntax,
    invalid_value,
)

PATCH_OP = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
CORE_PREFIXES = (
    "urn:ietf:params:scim:schemas:core:2.0:user:",
    "urn:ietf:params:scim:schemas:core:2.0:group:",
)
OPS = ("add", "replace", "remove")

_PATH = re.compile(
    r"""^(?P<attr>[A-Za-z$][\w$-]*)
    (?:\[\s*(?P<key>[A-Za-z][\w]*)\s+eq\s+(?:"(?P<text>(?:[^"\\]|\\.)*)"|(?P<word>[^\s\]]+))\s*\])?
    (?:\.(?P<sub>[A-Za-z$][\w$-]*))?$""",
    re.VERBOSE,
)


@dataclass(frozen=True, slots=True)
class Path:
    """`attr[key eq "match"].sub`, the names in lower case; a name that is an extension's
    (its URN not the core schema's) is `attr` with `extension` set."""

    attr: str
    sub: str = ""
    key: str = ""
    match: str = ""
    extension: bool = False


@dataclass(frozen=True, slots=True)
class Operation:
    op: str  # "add", "replace" or "remove"
    path: Path | None
    value: Any


def parse_path(text: str) -> Path:
    raw = text.strip()
    lowered = raw.lower()
    for prefix in CORE_PREFIXES:
        if lowered.startswith(prefix):
            raw = raw[len(prefix) :]
            break
    else:
        if lowered.startswith("urn:"):
            # An extension's attribute (Entra ID's enterprise user: department, manager…).
            return Path(attr=lowered, extension=True)
    match = _PATH.match(raw)
    if match is None:
        raise ScimError(400, f"cannot read the path {text!r}", scim_type=INVALID_PATH)
    value = match["text"] if match["text"] is not None else (match["word"] or "")
    return Path(
        attr=match["attr"].lower(),
        sub=(match["sub"] or "").lower(),
        key=(match["key"] or "").lower(),
        match=re.sub(r"\\(.)", r"\1", value).strip('"'),
    )


def _flattened(value: dict[str, Any]) -> list[tuple[Path, Any]]:
    """A value object without a path, as (path, value) pairs: `{"name": {"givenName": x}}`
    and `{"name.givenName": x}` alike give (name.givenName, x)."""
    pairs: list[tuple[Path, Any]] = []
    for key, item in value.items():
        path = parse_path(key)
        if isinstance(item, dict) and not path.sub and not path.extension:
            for sub, inner in item.items():
                pairs.append((Path(attr=path.attr, sub=str(sub).lower()), inner))
        else:
            pairs.append((path, item))
    return pairs


def operations(body: dict[str, Any]) -> list[Operation]:
    """The body's operations, each with a path (a value object without one is split into
    one operation per attribute it names)."""
    schemas = body.get("schemas")
    if not isinstance(schemas, list) or PATCH_OP not in schemas:
        raise invalid_syntax(f"a PATCH body is a PatchOp: its schemas name {PATCH_OP}")
    listed = body.get("Operations", body.get("operations"))
    if not isinstance(listed, list) or not listed:
        raise invalid_syntax("Operations must be a list of operations")
    found: list[Operation] = []
    for entry in listed:
        if not isinstance(entry, dict):
            raise invalid_syntax("each operation must be an object")
        op = str(entry.get("op", "")).lower()
        if op not in OPS:
            raise invalid_syntax(f"op must be add, replace or remove, not {entry.get('op')!r}")
        raw_path = entry.get("path")
        if raw_path is not None and not isinstance(raw_path, str):
            raise ScimError(400, "path must be a string", scim_type=INVALID_PATH)
        if raw_path and raw_path.strip():
            found.append(Operation(op, parse_path(raw_path), entry.get("value")))
        elif op == "remove":
            raise ScimError(400, "remove needs a path", scim_type=NO_TARGET)
        elif isinstance(entry.get("value"), dict):
            found.extend(Operation(op, path, value) for path, value in _flattened(entry["value"]))
        else:
            raise invalid_value(f"{op} without a path needs an object as its value")
    return found


def boolean(value: Any, name: str) -> bool:
    """A SCIM boolean, or its text as Entra ID sends it ("True", "False")."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise invalid_value(f"{name} must be true or false, not {value!r}")
