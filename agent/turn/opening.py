"""What a chat shows as it opens: its latest messages, whether a turn of it runs, the run a
socket may have to follow to its end, what its waiting turns ask, the model its next
turn talks to and the tools answered "always" in it.

The reads are made here, in this order, rather than by each door: which turn counts as
running (this process's or another's) and which reads must come together are the turn's
rules, not a door's.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.events import ApprovalRequest
from agent.turn.approvals import pending_requests
from agent.turn.locks import is_running_here
from agent.turn.policies import Person, person_settings
from agent.turn.slash import model_in_use
from agent.turn.store import has_running_turn, history_page, unfinished_run
from sessions_app.models import Run, Session
from sessions_app.selectors import DisplayPage


@dataclass(frozen=True, slots=True)
class SessionOpening:
    page: DisplayPage
    running: bool
    # The session's latest run still marked running, whether or not its process lives.
    unfinished: Run | None
    requests: list[ApprovalRequest]
    model: str
    # The tools answered "always" in it, which no longer wait for a yes there.
    allowed_tools: list[str]


async def open_session(session: Session, *, owner: Person = None) -> SessionOpening:
    """Read what a chat shows as it opens, for `session` of `owner`."""
    page = await history_page(session_id=session.pk)
    running = is_running_here(session.pk) or await has_running_turn(session_id=session.pk)
    # Read with the history, before the tab has it: a run that ends once the tab is shown
    # running is still followed to its end.
    unfinished = await unfinished_run(session_id=session.pk)
    # What the session's waiting turns ask, for the tab to answer too.
    requests = await pending_requests(session_id=session.pk)
    return SessionOpening(
        page=page,
        running=running,
        unfinished=unfinished,
        requests=requests,
        model=model_in_use(session.model, await person_settings(owner)),
        allowed_tools=list(session.allowed_tools),
    )
