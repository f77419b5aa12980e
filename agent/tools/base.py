"""The tool interface: a named, JSON-schema-described async callable that returns text."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from typing import Any

logger = logging.getLogger(__name__)


class ToolError(Exception):
    """A failure the model should read as plain text.

    Tools raise it for expected problems (missing file, bad path); the registry turns it
    into ``"Error: <message>"`` instead of the traceback-flavoured text used for bugs.
    """


class Tool(ABC):
    """Base class for every tool the model can call.

    Subclasses set ``name``, ``description`` and ``parameters`` (a JSON schema of type
    object) and implement ``execute``. ``execute`` gets the already validated arguments as
    keyword arguments and returns the text the model will see.
    """

    name: str = ""
    description: str = ""
    parameters: dict[str, Any] = {"type": "object", "properties": {}}

    @abstractmethod
    async def execute(self, **kwargs: Any) -> str:
        """Run the tool and return its result as text."""

    def definition(self) -> dict[str, Any]:
        """The OpenAI function-tool dict for this tool."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"
