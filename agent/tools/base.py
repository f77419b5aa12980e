"""The tool interface: a named, JSON-schema-described async callable that returns text,
and the per-turn context the registry hands it."""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from agent.tools.tool_errors import ToolError

if TYPE_CHECKING:
    from pathlib import Path

    from agent.tools.guards.fence import Workspace
    from agent.tools.hooks import TurnHooks

logger = logging.getLogger(__name__)

DEFAULT_TIME_LIMIT = 300.0


class Deliver(Protocol):
    """Sends a message from the agent to a conversation of the turn's owner."""

    async def __call__(self, content: str, *, session_key: str | None = None) -> str | None:
        """Deliver ``content`` to ``session_key`` (where the turn's answer goes when None);
        the key it went to, or None when that is the turn's own conversation."""


class Agents(Protocol):
    """Starts sub-agents for the turn: agents of their own, with a task and no history."""

    async def spawn(self, task: str, label: str) -> str:
        """Queue a sub-agent; return its id at once. It reports back to the turn's session
        when it ends."""

    async def run(self, task: str, label: str) -> str:
        """Run a sub-agent to its end and return its answer."""


@dataclass(frozen=True, slots=True)
class JobInfo:
    """A scheduled job as the `cron` tool shows it."""

    id: int
    name: str
    message: str
    schedule: str
    session: str
    enabled: bool
    next_run: str | None
    last_status: str


class Schedules(Protocol):
    """The scheduled jobs of the turn's owner; `add` schedules one for the turn's session.
    Every method raises `ToolError` with a reason the model can act on."""

    async def add(
        self,
        *,
        message: str,
        every_seconds: int | None,
        cron_expr: str | None,
        tz: str | None,
        at: str | None,
    ) -> JobInfo: ...

    async def list(self) -> list[JobInfo]: ...

    async def remove(self, job_id: int) -> JobInfo: ...

    async def set_enabled(self, job_id: int, enabled: bool) -> JobInfo: ...


class Wrote(Protocol):
    """Hears of a file a file tool of the turn wrote, by its resolved path, and of each
    command's end (None: it may have written anything in the folder)."""

    async def __call__(self, path: Path | None) -> None: ...


async def _undeliverable(content: str, *, session_key: str | None = None) -> None:
    raise ToolError("this turn has nowhere to deliver messages")


@dataclass(frozen=True, slots=True)
class ToolContext:
    """The turn a tool call runs in. Frozen and made per turn: concurrent turns never share
    one, so a tool never has to guess whose call it is serving.

    ``cancelled`` is set when the turn is stopped or over; work a tool started outside the
    turn's own task (a background job, a shared client's request) should end with it.
    ``workspace`` is the turn's user's own folder: file tools and ``exec`` work there.
    """

    session_key: str
    channel: str
    run_id: str = ""
    owner_id: int | None = None
    deliver: Deliver = _undeliverable
    # None where the turn may not start sub-agents (a sub-agent's own turn) or schedule jobs
    # (a cron run, a sub-agent): the tools say so.
    agents: Agents | None = None
    schedules: Schedules | None = None
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    # The folder the turn's user works in, fenced; None outside a turn, where a tool keeps
    # to the workspace it was made with.
    workspace: Workspace | None = None
    # The operator's hooks that see the turn's tool calls; None when there are none.
    hooks: TurnHooks | None = None
    # Told of each file a file tool wrote in the turn (its resolved path), once written, and
    # of each command's end.
    wrote: Wrote | None = None

    @classmethod
    def detached(cls, channel: str = "direct") -> ToolContext:
        """A context for calling tools outside any turn (scripts, tests, benchmarks)."""
        return cls(session_key=f"{channel}:detached", channel=channel)


class Tool(ABC):
    """Base class for every tool the model can call.

    Subclasses set ``name``, ``description`` and ``parameters`` (a JSON schema of type
    object), may set ``time_limit``, and implement ``execute``. ``execute`` gets the turn's
    ``ToolContext`` first (positional, so no argument name of the model's can clash with
    it), then the already validated arguments as keyword arguments, and returns the text
    the model will see.

    One instance serves every turn of the process: keep per-call state in locals and
    per-turn facts in the context, never on ``self``.
    """

    name: str = ""
    description: str = ""
    parameters: dict[str, Any] = {"type": "object", "properties": {}}
    # The most seconds one call may take before the registry stops it and tells the model;
    # None for a tool that bounds its own calls (exec, MCP tools) or runs a whole agent.
    time_limit: float | None = DEFAULT_TIME_LIMIT
    # Whether a call may run at the same time as the other calls of one model answer: it
    # changes nothing that they could read or change (a read, a listing, a web request).
    parallel_safe: bool = False

    @abstractmethod
    async def execute(self, ctx: ToolContext, /, **kwargs: Any) -> str:
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
