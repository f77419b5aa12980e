"""Lists of tool names and globs (`exec`, `mcp_*`, `web_?etch`): which tools wait for a
person's yes before they run (`AGENT_APPROVE_TOOLS`, and what a user, a session or a skill
adds). Plain Python: the settings, the data apps and the turn package all read them."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from typing import Any

# A tool's name, or a glob of names: fnmatch's `*`, `?` and `[…]` besides a name's letters.
PATTERN = re.compile(r"^[A-Za-z0-9_.*?!\[\]-]{1,128}$")
MAX_PATTERNS = 100


def parse(value: str | Iterable[Any] | None) -> tuple[str, ...]:
    """The patterns in `value`, as loosely as a person writes them: a comma- or
    space-separated string, or a list (a skill's frontmatter); unusable entries are left
    out, duplicates too."""
    if value is None:
        return ()
    items = value.replace(",", " ").split() if isinstance(value, str) else value
    found = (str(item).strip() for item in items if isinstance(item, str | int))
    return tuple(dict.fromkeys(item for item in found if PATTERN.match(item)))[:MAX_PATTERNS]


def problems(value: Any) -> list[str]:
    """Why `value` is not a list of patterns, strictly (what the API and the admin take);
    empty when it is one."""
    if not isinstance(value, list):
        return ['give a list of tool names or globs, such as ["exec", "mcp_*"]']
    if len(value) > MAX_PATTERNS:
        return [f"give at most {MAX_PATTERNS} tool names or globs"]
    wrong = [item for item in value if not isinstance(item, str) or not PATTERN.match(item)]
    return [
        f"{item!r} is not a tool name or glob (letters, digits, _ . - and * ? [ ] !)"
        for item in wrong
    ]


def matches(name: str, patterns: Iterable[str]) -> bool:
    """Whether the tool `name` is one that `patterns` name."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)
