"""The API's one rule for request bodies: a field the endpoint does not take is a 400 that
names it, never dropped in silence. A client that sends `{"model": …}` to an endpoint that
cannot change the model (or misspells a field) learns so, rather than reading a 200 as done.

An object read with GET may be sent back whole with PUT or PATCH, its read-only fields
(`created`, `next_run`, …) included: such a field is let through when it says what the
object says now, and is a 400 when it says something else, since the client then meant to
change what cannot be changed here (or sends what it read before a change: the 400 says what
the field reads now). The view hands the object as read in the serializer's context
(`AS_READ`).

Every input serializer of `/api/` takes its base from here: `KnownFieldsOnly` for a plain
one, `KnownFieldsOnly` beside `ModelSerializer` for a model's. The schema says the same
(`additionalProperties: false` on each request body), through the extension below."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from drf_spectacular.extensions import OpenApiSerializerExtension
from rest_framework import serializers

# The context key of the object as a GET shows it (its output serializer's `.data`).
AS_READ = "as_read"
# Django's CSRF field, which a browser's form may post beside the fields (the login-cookie
# check reads it; it is no field of the endpoint's).
_FORM_EXTRAS = frozenset({"csrfmiddlewaretoken"})


class KnownFieldsOnly(serializers.Serializer):
    """An input serializer that refuses the fields it does not take, each named in the 400
    with the fields it does take; one of the object's read-only fields passes only with the
    value it was read with."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            errors = self._not_taken(data)
            if errors:
                raise serializers.ValidationError(errors)
        return super().to_internal_value(data)

    def _not_taken(self, data: Mapping[Any, Any]) -> dict[str, list[str]]:
        writable = [name for name, field in self.fields.items() if not field.read_only]
        as_read: Mapping[str, Any] = self.context.get(AS_READ) or {}
        errors: dict[str, list[str]] = {}
        for name in data:
            if name in writable or name in _FORM_EXTRAS:
                continue
            if name in as_read:
                if data[name] != as_read[name]:
                    now = json.dumps(as_read[name], default=str)
                    now = now if len(now) <= 200 else now[:199] + "…"
                    errors[str(name)] = [
                        f"This field is read-only: it cannot be changed here (it reads {now} "
                        "now). Leave it out, or send it as it reads."
                    ]
                continue
            taken = ", ".join(writable) or "none"
            errors[str(name)] = [f"Unknown field. The fields taken here are: {taken}."]
        return errors


class NoFields(KnownFieldsOnly):
    """The body of a POST that takes no fields (`/api/cron-jobs/<id>/run`): empty, or a 400
    naming what was sent, as the other endpoints name theirs."""


class KnownFieldsOnlySchema(OpenApiSerializerExtension):
    """The request bodies of `KnownFieldsOnly` serializers, with `additionalProperties:
    false`: a generated client, or schemathesis, knows that an extra field is refused."""

    target_class = KnownFieldsOnly
    match_subclasses = True

    def map_serializer(self, auto_schema: Any, direction: Any) -> Any:
        schema = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        if direction == "request":
            schema["additionalProperties"] = False
        return schema
