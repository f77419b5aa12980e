"""What a guard raises."""

from __future__ import annotations

from agent.tools.base import ToolError


class GuardError(ToolError):
    """A request that a guard refused (path outside the workspace, denied command)."""
