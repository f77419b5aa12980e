"""How a person is named to others: in a team chat, beside what they wrote and among who
is looking."""

from __future__ import annotations

from typing import Any


def person(user: Any) -> dict[str, Any]:
    """`{id, name}`: the full name, or the username of one who gave none."""
    return {"id": user.pk, "name": display_name(user)}


def display_name(user: Any) -> str:
    full = user.get_full_name().strip() if hasattr(user, "get_full_name") else ""
    return full or user.get_username()


def named(user_id: int | None, first: str, last: str, username: str | None) -> Any:
    """`person` of a row's annotated fields; None without a user."""
    if user_id is None or username is None:
        return None
    return {"id": user_id, "name": f"{first} {last}".strip() or username}
