"""What a door may ask of one turn besides its message: the tools it may use, the
conversation it continues when the door's client brings its own, the client's instructions,
and generation settings of its own.

The tools are recorded with the run (`Run.tools`), so that a queued turn keeps to them
wherever it runs, and so does what the turn starts: its sub-agents and the turn that
announces each, and the jobs it schedules (`CronJob.tools`). The rest lives as long as the
call that runs the turn, as the conversation a client sends with each request does.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from agent.budget import LLMMessage
from agent.llm import LLMConfig
from agent.tools import ToolRegistry
from sessions_app.models import Run

if TYPE_CHECKING:
    from agent.turn.attachments import Kept

# None: every tool the turn's kind of turn has. False: a direct generation, the model alone
# (no tools, no agent prompt, one call). Names: those tools alone.
Tools = Literal[False] | tuple[str, ...] | None


@dataclass(frozen=True, slots=True)
class TurnOptions:
    tools: Tools = None
    # The conversation before the new message, in OpenAI's chat format (user, assistant
    # and tool messages); None: the session's stored history.
    history: tuple[LLMMessage, ...] | None = None
    # The client's own instructions (its system messages): after the agent's prompt, or
    # the whole system message of a direct generation.
    instructions: str = ""
    temperature: float | None = None
    max_tokens: int | None = None
    # The client's own tools (OpenAI function definitions), offered beside the turn's: a
    # call of one ends the turn, handed over to the client (`TurnResult.handed_over`).
    client_tools: tuple[dict[str, Any], ...] = ()
    # The client's `tool_choice`, for the turn's first model call.
    tool_choice: str | dict[str, Any] | None = None
    # The client's other generation parameters (`stop`, `seed`, `top_p`, the penalties,
    # `response_format`, `logprobs`, `parallel_tool_calls`), sent with every model call.
    params: tuple[tuple[str, Any], ...] = ()
    # The files of the new message as the client sent them, each with the parameter that
    # names it (`messages[3].content[1]`), and once read (`attachments.prepare`), as kept.
    attachments: tuple[tuple[str, dict[str, Any]], ...] = ()
    files: tuple[Kept, ...] = ()
    # A turn that goes on from calls of the client's tools rather than from a new message.
    continuation: Continuation | None = None
    # The model these options were checked and their files made ready for
    # (`service.prepare_options`): a turn on that model need not do it again.
    prepared_for: str = ""
    # No one can be asked while the turn runs (a client that cannot answer an approval):
    # a tool that waits for a person is refused at once.
    unattended: bool = False

    @property
    def direct(self) -> bool:
        return self.tools is False

    def client_tool_names(self) -> frozenset[str]:
        return frozenset(tool["function"]["name"] for tool in self.client_tools)

    def recorded_tools(self) -> bool | list[str] | None:
        """`tools` as the run records it (`Run.tools`)."""
        return list(self.tools) if isinstance(self.tools, tuple) else self.tools

    def tune(self, config: LLMConfig) -> LLMConfig:
        """The model's settings with the turn's own generation settings over them."""
        if self.temperature is not None:
            config = dataclasses.replace(config, temperature=self.temperature)
        if self.max_tokens is not None:
            config = dataclasses.replace(config, max_tokens=self.max_tokens)
        if self.params:
            config = dataclasses.replace(config, params=self.params)
        return config


@dataclass(frozen=True, slots=True)
class Continuation:
    """What a turn handed over to its client goes on from: the messages the client says the
    turn had (after its user message: the model's calls, and each result) and the client's
    results, by call id. The turn's own record, where it matches, stands in for the former:
    it holds what the client never saw, the agent's own calls and their results."""

    turn: tuple[LLMMessage, ...]
    results: tuple[tuple[str, str], ...] = field(default=())


def tools_of(run: Run) -> Tools:
    """The tools a run's turn may use, as recorded; anything unexpected reads as every tool
    would be wrong, so it reads as none."""
    recorded: Any = run.tools
    if recorded is None:
        return None
    if isinstance(recorded, list) and all(isinstance(name, str) for name in recorded):
        return tuple(recorded)
    return False


def restrict(registry: ToolRegistry, allowed: Tools) -> ToolRegistry:
    """`registry` less the tools a turn may not use."""
    if allowed is None:
        return registry
    keep = frozenset(allowed or ())
    return registry.without(frozenset(registry.names()) - keep)
