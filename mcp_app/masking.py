"""The values of a server's `env` and `headers` are secrets (API keys, bearer tokens): they
go in, never out. Whatever shows a server shows each name with `MASK` for its value; a form
or a request that sends `MASK` back for a name means "keep what is stored"."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError

MASK = "********"
SECRET_FIELDS = ("env", "headers")


def masked(values: Mapping[str, Any] | Any) -> dict[str, str] | Any:
    """`values` with each value replaced by `MASK`; anything but a mapping as it is (the
    model's rules refuse it, and it holds no name to show)."""
    if not isinstance(values, Mapping):
        return values
    return dict.fromkeys(values, MASK)


def unmask(submitted: Any, stored: Mapping[str, str], *, ignore_case: bool = False) -> Any:
    """`submitted` with each `MASK` replaced by the stored value of the same name (of any
    case, for `ignore_case`: header names). The submitted object replaces the stored one:
    a name it leaves out is gone. `MASK` for a name with nothing stored is refused, since
    storing the mask itself would be a secret nobody meant."""
    if not isinstance(submitted, Mapping):
        return submitted
    if ignore_case:
        stored = {name.lower(): value for name, value in stored.items()}
    result: dict[str, Any] = {}
    for name, value in submitted.items():
        if value == MASK:
            key = name.lower() if ignore_case and isinstance(name, str) else name
            if key not in stored:
                raise ValidationError(
                    f"{name} has no stored value to keep: send its value, not {MASK}."
                )
            value = stored[key]
        result[name] = value
    return result
