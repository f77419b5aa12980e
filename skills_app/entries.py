"""A skill as the agent is offered it, wherever it is kept (the database or a file)."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path


@dataclass(frozen=True, slots=True)
class SkillEntry:
    name: str
    description: str
    content: str
    always: bool = False
    # The file it came from; None for a skill kept in the database.
    path: Path | None = None
    # What it needs to work: programs on the PATH and environment variables.
    bins: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    # Tools (names or globs) that wait for a person's yes while the skill is offered.
    approve_tools: tuple[str, ...] = ()

    @property
    def available(self) -> bool:
        return not self.missing

    def checked(self, environment: Mapping[str, str]) -> SkillEntry:
        """This entry with `missing` filled in: what commands run in `environment` lack."""
        path = environment.get("PATH")
        missing = [f"program {b}" for b in self.bins if shutil.which(b, path=path) is None]
        missing += [f"variable {name}" for name in self.env if not environment.get(name)]
        return replace(self, missing=tuple(missing))
