"""Cron jobs as the agent runs them (the `cron` tool changes them: `owner_schedules`).

A run of job N is a turn of session `cron:N` (the job's owner's) with the job's message;
its answer is then delivered to the session the job reports to: saved there, and shown on
its open sockets as a `message` frame followed by `cron_executed`. Each run counts against
its owner's turn rate (`ratelimit`); one past it, or past the owner's daily budget
(`spending`), does not call the model: the job records it as skipped, with why, and
nothing is delivered.

A run keeps to the tools of the turn that scheduled its job (`CronJob.tools`), and is
refused, having no one to ask, what waited for a person there (`CronJob.approve_tools`) and
what waits in the chat it reports to: its answer lands there as the chat's own turns' do.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection
from datetime import datetime
from uuid import UUID

from django.utils import timezone

from agent import failures, tool_patterns
from agent.events import CronExecuted
from agent.turn import fanout, ratelimit, spending, store
from agent.turn.delivery import post
from agent.turn.fanout import GroupSink
from agent.turn.policies import person_settings
from agent.turn.refusals import AccountInactive
from agent.turn.service import run_recorded
from cron_app.models import CronJob
from sessions_app.models import Session

logger = logging.getLogger(__name__)

CHANNEL = "cron"
# How `run_cron_job` ends a run that the owner's turn rate or budget kept from starting; the
# job records it as skipped, with why.
LIMITED = "limited"


async def run_cron_job(job_id: int, *, scheduled: bool = True, due: datetime | None = None) -> str:
    """Run job `job_id` now. `scheduled`: a dispatcher claimed its run due at `due`, and
    planned the next (`cron_app.dispatch`); without `due`, the task was queued before
    dispatchers did that, so the run claims itself first. How the run ended."""
    job = await store.get_job(job_id=job_id)
    if job is None:
        logger.warning("cron job %s no longer exists", job_id)
        return "missing"
    if scheduled and due is None:
        if job.next_run is None or job.next_run > timezone.now():
            return "taken"  # not due: another run took it, or it was changed since
        if await store.claim_job(job=job, now=timezone.now()) is None:
            return "taken"
    elif scheduled and not job.enabled and job.kind != CronJob.Kind.AT:
        return "disabled"  # disabled between its claim and now (a one-off's claim did it)
    started = timezone.now()
    target = await store.get_or_create_session(key=job.session, owner=job.owner)
    status, text, delivered = await _turn(job, target)
    await store.record_job_run(
        job_id=job.pk,
        status=CronJob.Status.SKIPPED if status == LIMITED else status,
        error="" if status in ("succeeded", "skipped") else text,
        when=started,
    )
    if status == "skipped":
        logger.info("cron job %s is still running; this run is skipped", job.pk)
        return status
    if status == LIMITED:
        # Not told in the chat: a job every few seconds would fill it with these.
        logger.warning("cron job %s %s", job.pk, text)
        return status
    ran = CronExecuted(job_id=str(job.pk), status=status)
    if delivered:  # the model sent its answer itself, with the message tool
        await fanout.publish(target.pk, ran)
    else:
        await post(target, text, ran)
    return status


async def _turn(job: CronJob, target: Session) -> tuple[str, str, bool]:
    """How the job's turn ended, its answer, and whether the model already delivered it."""
    if not job.owner.is_active:
        # Kept, as the account is, for staff who may activate it again; it runs nothing.
        return LIMITED, f"skipped: {AccountInactive(job.owner.get_username())}", False
    session = await store.get_or_create_session(key=job.session_key, owner=job.owner)
    model = session.model or (await person_settings(job.owner)).model
    run = await store.queue_run_unless_busy(
        session=session,
        channel=CHANNEL,
        prompt=job.message,
        model=model,
        cron_job_id=job.pk,
        tools=job.tools,
        approve_tools=_carried(job, target),
    )
    if run is None:
        return "skipped", "", False
    # Counted once the run is sure to be a turn: a run skipped for the one still going
    # takes no place in the owner's window, and neither does one past the owner's budget.
    why = await spending.past_budget(job.owner)
    if why is None and await asyncio.to_thread(ratelimit.take_turn_slot, job.owner_id) is not None:
        why = ratelimit.past_rate(job.owner.get_username())
    if why is not None:
        await store.fail_unfinished_run(run_id=run.pk, text=f"Skipped: {why}.", error=why)
        return LIMITED, f"skipped: {why}", False
    result = await run_recorded(run, owner=job.owner, emit=GroupSink(session.pk), reply_to=target)
    return result.status, result.text, result.delivered


def _carried(job: CronJob, target: Session) -> tuple[str, ...]:
    """What waits for a person in a run of `job` reporting to `target`, beyond what every
    turn of its owner gets: read from the chat at each run, so that a tool made to wait
    there since the job was made waits in its runs too."""
    found = [*tool_patterns.parse(job.approve_tools), *tool_patterns.parse(target.approve_tools)]
    return tuple(dict.fromkeys(found))


async def report_dead_cron_runs(run_ids: Collection[UUID]) -> int:
    """Close what the sweep found of cron runs among `run_ids` (runs whose process died
    mid-turn): the job records the failure and the chat it reports to reads why, as after
    any failed run. The job was planned for its next time before its turn began, and its
    session is free for that run now that the dead one has ended. How many were reported."""
    reported = 0
    for run_id in run_ids:
        try:
            reported += await _report_dead_run(run_id)
        except Exception:  # one job's report must not keep the others' from their chats
            failures.log_failure(logger, "could not report the dead cron run %s", run_id)
    return reported


async def _report_dead_run(run_id: UUID) -> bool:
    run = await store.get_run(run_id=run_id)
    if run is None or run.channel != CHANNEL:
        return False
    _, _, number = run.session.key.partition(":")
    job = await store.get_job(job_id=int(number)) if number.isdigit() else None
    if job is None:
        return False  # deleted since; nobody waits for it
    reason = run.error or "it stopped before it finished"
    when = run.started or run.created
    if job.last_run is None or job.last_run <= when:  # not over a later run's record
        await store.record_job_run(
            job_id=job.pk, status=CronJob.Status.FAILED, error=reason, when=when
        )
    sentence = f"The cron job '{job.name}' did not finish: {reason}."
    if job.enabled and job.next_run is not None:
        sentence += f" It runs again at {job.next_run.isoformat(timespec='minutes')}."
    target = await store.get_or_create_session(key=job.session, owner=job.owner)
    await post(target, sentence, CronExecuted(job_id=str(job.pk), status=CronJob.Status.FAILED))
    logger.info("told %s that cron job %s's run %s died", job.session, job.pk, run_id)
    return True
