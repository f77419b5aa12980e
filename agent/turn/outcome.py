"""How a turn ended, as whoever started it gets it back (`TurnResult`), and the shape of
the call that runs a turn recorded beforehand (`RunRecorded`), which the service hands to
the parts of a turn that start turns of their own (a sub-agent run to its end)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from django.contrib.auth.models import User

from agent.events import Emit, discard
from sessions_app.models import Run, Session


@dataclass
class TurnResult:
    session_key: str
    text: str
    status: str
    run_id: str | None = None
    iterations: int = 0
    tools_used: list[str] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    error_kind: str | None = None
    # The turn succeeded and its model sent the conversation it reports to (a cron job's,
    # the heartbeat's) what it had to say with the `message` tool: the caller need not
    # deliver the reply there too.
    delivered: bool = False
    # With status "waiting": the calls that wait for a person, `{id, name, arguments}`.
    pending: list[dict[str, Any]] = field(default_factory=list)
    # The calls of the client's own tools the turn ended with, `{id, name, arguments}`
    # (arguments as the model wrote them, JSON text): the client runs them, and its
    # results continue the turn. `text` is then what the model wrote beside them.
    handed_over: list[dict[str, str]] = field(default_factory=list)
    # The log probabilities of the answer's text, when the client asked for them.
    logprobs: list[Any] = field(default_factory=list)
    # The model server the turn called (`LLMConfig.endpoint`), for the operator's own door
    # to name when it could not be reached; users' doors name no host.
    endpoint: str | None = None

    @property
    def success(self) -> bool:
        return self.status == Run.Status.SUCCEEDED


class RunRecorded(Protocol):
    """Runs the turn recorded as the queued `run`, as `owner`; one that cannot start ends
    failed on its record and comes back as such (`service.run_recorded`)."""

    async def __call__(
        self,
        run: Run,
        *,
        owner: User | None,
        emit: Emit = discard,
        reply_to: Session | None = None,
    ) -> TurnResult: ...
