"""Tasks: turns handed out as records that can be followed, waited for, or cancelled.

The API's doors call `submit_task`; a queued task runs later in the django-q2 worker
(`jobs.RUN_QUEUED_TASK`), a waited-for one right away. Either way it is the same
run record the turn service writes, so nothing is lost when a worker dies: the run is no
longer marked alive, and the sweep marks it failed.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid

from asgiref.sync import async_to_sync
from django.contrib.auth.models import User

from agent import failures, jobs
from agent.conf import agent_settings
from agent.context import compose_prompt
from agent.turn.approvals import answer_approval, end_waiting
from agent.turn.fanout import GroupSink, delivering
from agent.turn.refusals import ModelNotConfigured, SessionGone, TurnError
from agent.turn.service import resume_turn, run_queued
from agent.turn.slash import is_command
from agent.turn.spending import check_budget
from agent.turn.watch import announce_stop
from sessions_app import runs as run_records
from sessions_app import selectors, services
from sessions_app.models import Run, Session

logger = logging.getLogger(__name__)

CHANNEL = "api"
CANCEL_WAIT_SECONDS = 2.0


def submit_task(
    *,
    user: User,
    prompt: str,
    context: str | None = None,
    session_key: str | None = None,
    model: str | None = None,
    wait: bool = True,
    tools: bool | list[str] | None = None,
) -> Run:
    """Record a task and run it now (`wait`) or queue it for the worker; refused, with
    nothing recorded, while the user's daily budget is spent (`OverBudget`). `tools`: the
    ones it may use, or False for a direct generation (see `TurnOptions.tools`)."""
    content = compose_prompt(prompt, context)
    if not is_command(content):  # a command costs no model call
        check_budget(user)
    session = _session_for(user, session_key)
    if not (model or session.model or agent_settings().model):
        raise ModelNotConfigured()
    run = run_records.queue_run(
        session=session,
        channel=CHANNEL,
        prompt=content,
        model=model or "",
        tools=tools,
        author_id=user.pk,
    )
    if wait:
        execute_task(run, owner=user)
        finished = selectors.get_run(run_id=run.pk)
        if finished is None:  # deleted, with its session, while it ran
            raise SessionGone()
        run = finished
    else:
        jobs.enqueue(jobs.RUN_QUEUED_TASK, str(run.pk), task_name=f"turn-{run.pk}")
    return run


def execute_task(run: Run, *, owner: User | None) -> None:
    """Run a queued task's turn in this process, to its end. Never raises: however the
    turn ends, the run record says so."""
    try:
        # Its events are sent before this returns: a worker's loop closes when it does.
        turn = delivering(run_queued, what=f"run {run.pk}")
        async_to_sync(turn)(run, owner=owner, emit=GroupSink(run.session_id))
    except asyncio.CancelledError:
        # A cancel or /stop: the turn recorded itself as cancelled on its way out.
        logger.info("task %s was stopped", run.pk)
    except TurnError as exc:
        run_records.fail_unfinished_run(run_id=run.pk, text=str(exc), error=str(exc))
    except Exception:
        ref = failures.log_failure(logger, "task %s crashed", run.pk)
        run_records.fail_unfinished_run(
            run_id=run.pk,
            text=failures.internal_error(ref),
            error=f"internal error (reference {ref})",
        )


def cancel_task(run: Run) -> Run:
    """Stop a task; wait a little for a running one to notice, wherever it runs."""
    if run.status == Run.Status.WAITING:
        async_to_sync(end_waiting)(reason="stopped", run_id=run.pk)
    run = run_records.cancel_run(run_id=run.pk)
    if run.status == Run.Status.RUNNING:
        async_to_sync(announce_stop)([run.pk])
    deadline = time.monotonic() + CANCEL_WAIT_SECONDS
    while run.status == Run.Status.RUNNING and time.monotonic() < deadline:
        time.sleep(0.1)
        run = selectors.get_run(run_id=run.pk) or run  # gone: deleted with its session
    return run


def approve_task(
    run: Run, *, user: User, call_id: str, allow: bool, always: bool = False, wait: bool = True
) -> tuple[Run, bool]:
    """Answer the call `call_id` that the task `run` waits on (ApprovalNotFound or
    ApprovalClosed when it does not). Once none waits any more, the turn goes on: here,
    to its end or its next wait (`wait`), or in the worker. The task as it is then, and
    whether the worker was handed it."""
    answer = async_to_sync(answer_approval)(
        owner=user, run_id=run.pk, call_id=call_id, allow=allow, always=always
    )
    queued = False
    if answer.ready and wait:
        resume_task(run.pk)
    elif answer.ready:
        jobs.enqueue(jobs.RESUME_RUN, str(run.pk), task_name=f"resume-{run.pk}")
        queued = True
    found = selectors.get_run(run_id=run.pk)
    if found is None:  # deleted, with its session, meanwhile
        raise SessionGone()
    return found, queued


def resume_task(run_id: uuid.UUID) -> str:
    """Go on with a turn that waited for a person, in this process, to its end or its next
    wait; how it stands then. Never raises, like `execute_task`."""
    run = selectors.get_run(run_id=run_id)
    if run is None:
        return "missing"
    try:
        turn = delivering(resume_turn, what=f"resuming run {run_id}")
        async_to_sync(turn)(run_id, emit=GroupSink(run.session_id))
    except asyncio.CancelledError:
        # A cancel or /stop: the turn recorded itself as cancelled on its way out.
        logger.info("task %s was stopped as it went on", run_id)
    except Exception:
        ref = failures.log_failure(logger, "resuming task %s crashed", run_id)
        run_records.fail_unfinished_run(
            run_id=run_id,
            text=failures.internal_error(ref),
            error=f"internal error (reference {ref})",
        )
    finished = selectors.get_run(run_id=run_id)
    return finished.status if finished is not None else "missing"


def _session_for(user: User, key: str | None) -> Session:
    """The user's session `key`, new or not; a fresh one without a key."""
    return services.get_or_create_session(key=key or f"{CHANNEL}:{uuid.uuid4().hex}", owner=user)
