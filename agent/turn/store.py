"""The async side's boundary to the database: every read and write the turn makes.

Django's ORM is synchronous; these wrappers are the one boundary to it (`on_db`: one thread
on SQLite, a few with a connection each on PostgreSQL), so the rest of the agent stays
plain async code.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

from django.db import InterfaceError, OperationalError

from agent import jobs
from agent.turn import display, failed_replies
from agent.turn.db import on_db
from cron_app import selectors as job_selectors
from cron_app import services as job_services
from mcp_app import selectors as mcp_selectors
from sessions_app import approvals, selectors, services
from sessions_app import memory as memories
from sessions_app import runs as run_records
from sessions_app.models import Run, Session
from skills_app import selectors as skill_selectors

logger = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")


def repeatable(fn: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """`on_db(fn)` for a write that saves nothing twice however often it is made (a run's
    numbered messages): made once more when the database connection fails under it, which
    it may do after the commit went through as well as before."""
    once = on_db(fn)

    @functools.wraps(fn)
    async def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await once(*args, **kwargs)
        except (OperationalError, InterfaceError):
            logger.info("%s failed on a lost connection; it is made again", fn.__qualname__)
            return await once(*args, **kwargs)

    return call


get_or_create_session = on_db(services.get_or_create_session)
start_new_run = on_db(run_records.start_new_run)
add_message = on_db(services.add_message)
add_messages = repeatable(services.add_messages)
save_trace = on_db(services.save_trace)
finish_run = repeatable(run_records.finish_run)
set_session_model = on_db(services.set_session_model)
archive_messages = on_db(services.archive_messages)
recent_messages = on_db(selectors.recent_messages)
request_stop = on_db(run_records.request_stop)
get_session = on_db(selectors.get_session)
unfinished_run = on_db(selectors.unfinished_run)
get_run = on_db(selectors.get_run)
runs_to_stop = on_db(selectors.runs_to_stop)
has_running_turn = on_db(selectors.has_running_turn)
current_turn_open = on_db(selectors.current_turn_open)
mark_alive = on_db(run_records.mark_alive)
queue_run = on_db(run_records.queue_run)
start_queued_run = on_db(run_records.start_queued_run)
cancel_run = on_db(run_records.cancel_run)
queue_subagent = on_db(run_records.queue_subagent)
fail_unfinished_run = on_db(run_records.fail_unfinished_run)
relay = on_db(services.relay)
queue_run_unless_busy = on_db(run_records.queue_run_unless_busy)
latest_session = on_db(selectors.latest_session)
get_job = on_db(job_selectors.get_job)
find_job = on_db(job_selectors.find_job)
create_job = on_db(job_services.create_job)
delete_job = on_db(job_services.delete_job)
set_job_enabled = on_db(job_services.set_enabled)
claim_job = on_db(job_services.claim)
record_job_run = on_db(job_services.record_run)


@on_db
def jobs_of(*, owner_id: int | None) -> list[Any]:
    return list(job_selectors.jobs_of(owner=owner_id))


@on_db
def messages_for_display(*, session: Session, limit: int = 200) -> list[dict[str, Any]]:
    """The session's live conversation as its chat shows it (`display.shown`)."""
    return display.shown(selectors.messages_for_display(session=session, limit=limit))


@on_db
def history_page(
    *, session_id: int, limit: int = 200, before: int | None = None, back_to: int | None = None
) -> selectors.DisplayPage:
    """A page of the session's live conversation as its chat shows it (`display.shown`, and
    its failed turns' errors: `failed_replies`), and whether older messages exist: the
    latest, or those before message `before` (reaching back to message `back_to`, if given;
    see `selectors.display_page`)."""
    page = selectors.display_page(
        session_id=session_id, limit=limit, before=before, back_to=back_to
    )
    return selectors.DisplayPage(
        failed_replies.with_failures(display.shown(page.messages)), page.has_more
    )


@on_db
def version_page(*, session_id: int, message_id: int) -> list[dict[str, Any]] | None:
    """An earlier version of the conversation (`selectors.version_page`), as its chat shows
    messages (`display.shown`); None if there is none at that message."""
    shown = selectors.version_page(session_id=session_id, message_id=message_id)
    return None if shown is None else display.shown(shown)


rerun_start = on_db(selectors.rerun_start)
archive_from = on_db(services.archive_from)
relayed_after = on_db(selectors.relayed_after)
last_relayed_id = on_db(selectors.last_relayed_id)
subagent_run = on_db(selectors.subagent_run)
offered_skills = on_db(skill_selectors.offered_skills)
enabled_mcp_servers = on_db(mcp_selectors.enabled_servers)
long_term_memory = on_db(memories.long_term_memory)
latest_summary = on_db(memories.latest_summary)


@on_db
def more_unconsolidated_than(*, session_id: int, count: int) -> bool:
    # Looks `count` rows in, not at all of them: a session may hold a hundred thousand.
    return memories.unconsolidated(session_id=session_id)[count : count + 1].exists()


forget_allowed_tool = on_db(services.forget_allowed_tool)
allowed_tools = on_db(services.allowed_tools)
park_run = on_db(approvals.park_run)
answer_call = on_db(approvals.answer)
expire_overdue = on_db(approvals.expire_overdue)
take_runs_to_resume = on_db(approvals.take_runs_to_resume)
resume_run = on_db(approvals.resume_run)
cancel_waiting = on_db(approvals.cancel_waiting)
answers_of = on_db(approvals.answers_of)
run_messages = on_db(approvals.run_messages)
approval_in_session = on_db(approvals.approval_in_session)
user_approve_tools = on_db(approvals.user_approve_tools)
heartbeat_limits = on_db(approvals.heartbeat_limits)
set_heartbeat_limits = on_db(approvals.set_heartbeat_limits)


@on_db
def pending_approvals(*, session_id: int | None = None, run_id: Any = None) -> list[Any]:
    # Every socket that opens asks, and almost always nothing waits anywhere.
    if not approvals.anything_pending():
        return []
    return list(approvals.pending_approvals(session_id=session_id, run_id=run_id))


# Hands a job (a constant of `agent.jobs`) to the worker once what the caller wrote is
# committed.
enqueue = on_db(jobs.enqueue)


is_member = on_db(selectors.is_member)


@on_db
def author_of(*, run_id: Any) -> Any:
    """Whose turn run `run_id` is (`Run.author`; its session's owner for a run recorded
    before runs had authors); None if it is nobody's or gone."""
    run = Run.objects.select_related("author", "session__owner").filter(pk=run_id).first()
    if run is None:
        return None
    return run.author if run.author_id is not None else run.session.owner


@on_db
def owner_of(*, session_id: int) -> Any:
    """The user a session belongs to; None for an ownerless one or a session that is gone."""
    session = Session.objects.filter(pk=session_id).select_related("owner").first()
    return session.owner if session is not None else None
