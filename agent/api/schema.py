"""drf-spectacular hooks."""

from __future__ import annotations

from typing import Any


def drop_slashed_aliases(endpoints: list[tuple[str, Any, str, Any]], **kwargs: Any) -> list[Any]:
    """Every route also answers with a trailing slash; document each one once."""
    return [endpoint for endpoint in endpoints if not endpoint[0].endswith("/")]
