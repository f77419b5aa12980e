"""What a tool raises for the model to read: `ToolError`, and `GuardError` when a guard
refused the request. The registry turns either into an `Error: …` result."""

from __future__ import annotations


class ToolError(Exception):
    """A failure the model should read as plain text.

    Tools raise it for expected problems (missing file, bad path); the registry turns it
    into ``"Error: <message>"`` instead of the reference-only text used for bugs.
    """


class GuardError(ToolError):
    """A request that a guard refused (path outside the workspace, denied command)."""
