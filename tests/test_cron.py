"""Cron jobs: the `cron` tool, a job's plan kept in step with it, the claim that starts a
due run once, and a run delivering its answer to the job's session."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.utils import timezone

from agent.job_functions import fail_dead_runs, run_cron_job
from agent.turn import SessionRef, run_turn
from cron_app import dispatch, services, timing
from cron_app.models import CronJob
from sessions_app.models import Message, Run, Session
from tests.jobs import GroupListener, as_worker, hold_queue
from tests.llm_server import ScriptedLLM

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]


async def fire(job: CronJob, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], datetime]:
    """Make `job` due and let a dispatcher start it, its worker's task run here: what the
    task returned, and the time the run was due."""
    queue = hold_queue(monkeypatch)
    due = timezone.now()
    await sync_to_async(CronJob.objects.filter(pk=job.pk).update)(next_run=due)
    assert await sync_to_async(dispatch.start_due)() == 1
    assert queue.names() == ["run_cron_job"]
    return await queue.run_all(), due


def tool_results(key: str) -> list[str]:
    return list(
        Message.objects.filter(session__key=key, role="tool").values_list("content", flat=True)
    )


@pytest.fixture
def ada(db: None) -> User:
    return User.objects.create_user("ada", password="pw")


async def test_the_cron_tool_schedules_a_job_for_the_session_it_is_called_from(
    llm: ScriptedLLM, ada: User
) -> None:
    llm.tool_call(
        "cron",
        {
            "action": "add",
            "message": "Check the build",
            "cron_expr": "0 9 * * 1-5",
            "tz": "Europe/Paris",
        },
    )
    llm.tool_call("cron", {"action": "list"})
    llm.reply("Scheduled.")
    await run_turn(SessionRef("web:a1", ada), "remind me", channel="web")

    job = await sync_to_async(CronJob.objects.get)()
    assert (job.owner_id, job.session, job.kind) == (ada.pk, "web:a1", "cron")
    assert (job.cron_expr, job.tz, job.message) == (
        "0 9 * * 1-5",
        "Europe/Paris",
        "Check the build",
    )
    local = job.next_run.astimezone(timing.zone("Europe/Paris"))
    assert (local.hour, local.minute) == (9, 0) and local.weekday() < 5
    added, listed = await sync_to_async(tool_results)("web:a1")
    assert added.startswith(f"Scheduled job {job.pk}: cron '0 9 * * 1-5' (Europe/Paris)")
    assert f"#{job.pk} 'Check the build'" in listed and "reports to web:a1" in listed


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        (
            {"action": "add", "message": "x", "cron_expr": "61 * * * *"},
            "cron_expr: '61 * * * *' is not a cron expression",
        ),
        (
            {"action": "add", "message": "x", "cron_expr": "0 9 * * *", "tz": "Mars/Olympus"},
            "tz: unknown time zone 'Mars/Olympus'",
        ),
        (
            {"action": "add", "message": "x", "cron_expr": "0 0 31 2 *"},
            "cron_expr: '0 0 31 2 *' matches no date",
        ),
        (
            {"action": "add", "message": "x", "every_seconds": 5},
            "every_seconds: a job of kind 'every' needs every_seconds of at least 30",
        ),
        (
            {"action": "add", "message": "x", "at": "2001-01-01T00:00:00Z"},
            "at: 2001-01-01T00:00:00Z is in the past",
        ),
        (
            {"action": "add", "message": "x", "at": "next tuesday"},
            "at: 'next tuesday' is not an ISO 8601 time",
        ),
        (
            {"action": "add", "message": "x"},
            "add needs exactly one of every_seconds, cron_expr or at",
        ),
        ({"action": "add", "every_seconds": 60}, "add needs message"),
        ({"action": "remove"}, "remove needs job_id"),
        ({"action": "disable", "job_id": 999}, "there is no job 999"),
    ],
)
async def test_bad_jobs_are_errors_the_model_can_read(
    llm: ScriptedLLM, ada: User, arguments: dict[str, Any], reason: str
) -> None:
    llm.tool_call("cron", arguments).reply("I see.")
    await run_turn(SessionRef("web:a1", ada), "schedule it", channel="web")
    [result] = await sync_to_async(tool_results)("web:a1")
    assert result.startswith("Error") and reason in result, result
    assert await sync_to_async(CronJob.objects.count)() == 0


async def test_a_user_lists_and_changes_only_their_own_jobs(llm: ScriptedLLM, ada: User) -> None:
    bob = await sync_to_async(User.objects.create_user)("bob")
    theirs = await sync_to_async(services.create_job)(
        owner=bob, message="bob's", session="web:b", kind="every", every_seconds=60
    )
    llm.tool_call("cron", {"action": "list"})
    llm.tool_call("cron", {"action": "remove", "job_id": theirs.pk})
    llm.reply("ok")
    await run_turn(SessionRef("web:a1", ada), "jobs?", channel="web")
    listed, removed = await sync_to_async(tool_results)("web:a1")
    assert listed == "No scheduled jobs."
    assert removed.startswith(f"Error: there is no job {theirs.pk}")
    assert await sync_to_async(CronJob.objects.filter(pk=theirs.pk).exists)()


def test_the_plan_follows_the_job_through_every_change(ada: User) -> None:
    job = services.create_job(
        owner=ada, message="m", session="web:a", kind="every", every_seconds=120
    )
    assert abs((job.next_run - timezone.now()).total_seconds() - 120) < 5

    services.update_job(job=job, every_seconds=3600)
    assert abs((job.next_run - timezone.now()).total_seconds() - 3600) < 5

    services.set_enabled(job=job, enabled=False)
    assert job.next_run is None
    services.set_enabled(job=job, enabled=True)
    assert CronJob.objects.get(pk=job.pk).next_run == job.next_run is not None


def test_an_invalid_job_is_refused_before_anything_is_saved(ada: User) -> None:
    with pytest.raises(ValidationError) as caught:
        services.create_job(
            owner=ada, message="m", session="web:a", kind="cron", cron_expr="* *", tz="Nowhere"
        )
    assert set(caught.value.message_dict) == {"cron_expr", "tz"}
    assert not CronJob.objects.exists()


def test_a_job_without_an_owner_is_refused(ada: User) -> None:
    with pytest.raises(ValidationError) as caught:
        services.create_job(message="m", session="web:a", kind="every", every_seconds=60)
    assert caught.value.message_dict["owner"] == ["a cron job needs an owner: its runs are "
                                                  "that user's turns"]  # fmt: skip
    assert not CronJob.objects.exists()


async def test_the_cron_tool_of_a_turn_without_an_owner_refuses(llm: ScriptedLLM) -> None:
    llm.tool_call("cron", {"action": "add", "message": "x", "every_seconds": 60}).reply("I see.")
    await run_turn(SessionRef("cli:direct", None), "schedule it", channel="cli")
    [result] = await sync_to_async(tool_results)("cli:direct")
    assert result.startswith("Error: owner: a cron job needs an owner"), result
    assert await sync_to_async(CronJob.objects.count)() == 0


def test_a_one_off_job_in_the_past_is_refused(ada: User) -> None:
    past = timezone.now() - timedelta(minutes=1)
    with pytest.raises(ValidationError) as caught:
        services.create_job(owner=ada, message="m", session="web:a", kind="at", at=past)
    assert "is in the past" in caught.value.message_dict["at"][0]


def test_sending_a_job_back_unchanged_keeps_its_next_run(ada: User) -> None:
    job = services.create_job(
        owner=ada, message="m", session="web:a", kind="every", every_seconds=600
    )
    planned = job.next_run
    services.update_job(job=job, enabled=True, every_seconds=600, name="renamed")
    assert CronJob.objects.get(pk=job.pk).next_run == planned


def test_following_runs_skip_what_was_missed() -> None:
    due = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    every = {"kind": "every", "every_seconds": 60, "cron_expr": "", "tz": "UTC"}
    assert timing.following(**every, due=due, now=due + timedelta(seconds=1)) == due + timedelta(
        minutes=1
    )
    # Down for an hour and a half: the next run is the next one to come, not 90 late ones.
    late = due + timedelta(minutes=90, seconds=30)
    assert timing.following(**every, due=due, now=late) == due + timedelta(minutes=91)
    cron = {"kind": "cron", "every_seconds": None, "cron_expr": "30 2 * * *", "tz": "Europe/Paris"}
    after = timing.following(**cron, due=due, now=late)
    assert after.astimezone(timing.zone("Europe/Paris")).hour == 2 and after > late
    # The spring-forward night in Paris (02:30 does not exist on 2026-03-29) is not skipped
    # into the wrong day.
    spring = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)
    nxt = timing.following(**cron, due=spring, now=spring)
    assert nxt.date().isoformat() == "2026-03-29"


async def test_a_run_is_a_turn_of_its_own_session_delivered_to_the_jobs_session(
    llm: ScriptedLLM, ada: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = await sync_to_async(Session.objects.create)(
        key="web:a1", channel="web", chat_id="a1", owner=ada
    )
    job = await sync_to_async(services.create_job)(
        owner=ada, message="What is the weather?", session="web:a1", kind="every", every_seconds=60
    )
    llm.tool_call("cron", {"action": "list"}).reply("Sunny, 21 °C.")

    async with GroupListener(target.pk) as heard:
        ran, due = await fire(job, monkeypatch)
        assert ran == ["succeeded"]
        frames = await heard.frames(until="cron_executed")

    assert [f["type"] for f in frames] == ["message", "cron_executed"]
    assert frames[0] == {
        "type": "message",
        "role": "assistant",
        "content": "Sunny, 21 °C.",
    }
    assert frames[1] == {"type": "cron_executed", "job_id": str(job.pk), "status": "succeeded"}
    # The job's own session holds the turn; the target holds the answer.
    run = await sync_to_async(Run.objects.select_related("session").get)()
    assert (run.session.key, run.session.owner_id, run.channel) == (
        f"cron:{job.pk}",
        ada.pk,
        "cron",
    )
    delivered = await sync_to_async(list)(
        Message.objects.filter(session=target).values_list("role", "content")
    )
    assert delivered == [("assistant", "Sunny, 21 °C.")]
    # A cron run is offered no `cron` tool, and could not use one.
    offered = {tool["function"]["name"] for tool in llm.requests[0]["tools"]}
    assert "cron" not in offered and "spawn" not in offered and "exec" in offered
    assert (await sync_to_async(tool_results)(f"cron:{job.pk}"))[0].startswith(
        "Error: unknown tool 'cron'"
    )

    job = await sync_to_async(CronJob.objects.get)(pk=job.pk)
    assert job.last_status == "succeeded" and job.last_run is not None
    assert job.next_run == due + timedelta(seconds=60)


async def test_a_one_off_job_is_disabled_once_it_ran(
    llm: ScriptedLLM, ada: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = await sync_to_async(services.create_job)(
        owner=ada,
        message="ping",
        session="web:a1",
        kind="at",
        at=timezone.now() + timedelta(hours=1),
    )
    llm.reply("pong")
    assert (await fire(job, monkeypatch))[0] == ["succeeded"]
    job = await sync_to_async(CronJob.objects.get)(pk=job.pk)
    assert (job.enabled, job.next_run, job.last_status) == (False, None, "succeeded")


async def test_a_job_still_running_is_not_started_again(
    llm: ScriptedLLM, ada: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = await sync_to_async(services.create_job)(
        owner=ada, message="slow", session="web:a1", kind="every", every_seconds=60
    )
    session = await sync_to_async(Session.objects.create)(
        key=f"cron:{job.pk}", channel="cron", chat_id=str(job.pk), owner=ada
    )
    await sync_to_async(Run.objects.create)(
        session=session, channel="cron", prompt="slow", status="running", last_alive=timezone.now()
    )
    assert (await fire(job, monkeypatch))[0] == ["skipped"]
    assert llm.requests == []
    job = await sync_to_async(CronJob.objects.get)(pk=job.pk)
    assert job.last_status == "skipped" and job.next_run is not None


async def test_a_run_whose_task_was_lost_does_not_hold_the_job_back_for_good(
    llm: ScriptedLLM, ada: User, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that died with the job's task before starting it left the run queued: the
    sweep fails it once django-q2 would have handed the task out again, the chat is told,
    and the next tick runs."""
    job = await sync_to_async(services.create_job)(
        owner=ada, message="brief me", session="web:a1", kind="every", every_seconds=60
    )
    session = await sync_to_async(Session.objects.create)(
        key=f"cron:{job.pk}", channel="cron", chat_id=str(job.pk), owner=ada
    )
    lost = await sync_to_async(Run.objects.create)(
        session=session, channel="cron", prompt="brief me", status="queued"
    )
    assert (await fire(job, monkeypatch))[0] == ["skipped"]  # it may still start
    assert await sync_to_async(fail_dead_runs)() == 0  # not yet

    long_ago = timezone.now() - timedelta(seconds=settings.Q_CLUSTER["retry"] + 1)
    await sync_to_async(Run.objects.filter(pk=lost.pk).update)(created=long_ago)
    assert await sync_to_async(fail_dead_runs)() == 1
    await sync_to_async(lost.refresh_from_db)()
    assert lost.status == "failed" and "no worker started it" in lost.error
    [told] = await sync_to_async(list)(
        Message.objects.filter(session__key="web:a1").values_list("content", flat=True)
    )
    assert told.startswith("The cron job") and "no worker started it" in told

    llm.reply("Here is your brief.")
    assert (await fire(job, monkeypatch))[0] == ["succeeded"]


async def test_a_failed_run_is_recorded_and_reported(
    llm: ScriptedLLM, ada: User, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.AGENT_LLM_MAX_RETRIES = 0
    job = await sync_to_async(services.create_job)(
        owner=ada, message="m", session="web:a1", kind="every", every_seconds=60
    )
    llm.fault(401)
    assert (await fire(job, monkeypatch))[0] == ["failed"]
    job = await sync_to_async(CronJob.objects.get)(pk=job.pk)
    assert job.last_status == "failed" and job.last_error
    [(role, content)] = await sync_to_async(list)(
        Message.objects.filter(session__key="web:a1").values_list("role", "content")
    )
    assert role == "assistant" and content == job.last_error


async def test_run_now_leaves_the_schedule_alone(
    llm: ScriptedLLM, ada: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = hold_queue(monkeypatch)
    job = await sync_to_async(services.create_job)(
        owner=ada, message="m", session="web:a1", kind="every", every_seconds=600
    )
    await sync_to_async(services.run_now)(job=job)
    assert queue.names() == ["run_cron_job"]
    llm.reply("done")
    assert await queue.run_all() == ["succeeded"]
    after = await sync_to_async(CronJob.objects.get)(pk=job.pk)
    assert after.next_run == job.next_run and after.last_status == "succeeded"


def test_a_due_run_is_claimed_once(ada: User) -> None:
    job = services.create_job(
        owner=ada, message="m", session="web:a", kind="every", every_seconds=60
    )
    due = job.next_run
    assert due is not None
    read_twice = [CronJob.objects.get(pk=job.pk), CronJob.objects.get(pk=job.pk)]
    now = due + timedelta(seconds=1)
    claims = [services.claim(job=seen, now=now) for seen in read_twice]
    assert claims[0] is not None and claims[0].due == due and claims[1] is None
    assert CronJob.objects.get(pk=job.pk).next_run == due + timedelta(seconds=60)


def test_the_sweep_starts_only_what_no_dispatcher_did(
    ada: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent.job_functions import fail_dead_runs

    queue = hold_queue(monkeypatch)
    just_due, forgotten = (
        services.create_job(owner=ada, message="m", session="web:a", kind="every", every_seconds=60)
        for _ in range(2)
    )
    now = timezone.now()
    CronJob.objects.filter(pk=just_due.pk).update(next_run=now - timedelta(seconds=1))
    CronJob.objects.filter(pk=forgotten.pk).update(next_run=now - timedelta(minutes=2))
    fail_dead_runs()
    assert [args for _, args, _ in queue.jobs] == [(forgotten.pk,)]
    assert CronJob.objects.get(pk=just_due.pk).next_run == now - timedelta(seconds=1)


def test_a_job_missed_while_no_worker_ran_runs_once_and_skips_the_rest(
    ada: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = hold_queue(monkeypatch)
    job = services.create_job(
        owner=ada, message="m", session="web:a", kind="every", every_seconds=60
    )
    CronJob.objects.filter(pk=job.pk).update(next_run=timezone.now() - timedelta(hours=2))
    assert dispatch.start_due() == 1
    assert dispatch.start_due() == 0
    assert queue.names() == ["run_cron_job"]
    job = CronJob.objects.get(pk=job.pk)
    assert timezone.now() < job.next_run <= timezone.now() + timedelta(seconds=60)


async def test_a_task_queued_before_dispatchers_claims_its_run(llm: ScriptedLLM, ada: User) -> None:
    """A run queued by a version that had django-q2 schedule each job carries no due time:
    it claims the run itself, and one that finds it taken does nothing."""
    job = await sync_to_async(services.create_job)(
        owner=ada, message="m", session="web:a1", kind="every", every_seconds=60
    )
    due = timezone.now() - timedelta(seconds=1)
    await sync_to_async(CronJob.objects.filter(pk=job.pk).update)(next_run=due)
    llm.reply("done")
    assert await as_worker(run_cron_job)(job.pk) == "succeeded"
    assert await as_worker(run_cron_job)(job.pk) == "taken"
    job = await sync_to_async(CronJob.objects.get)(pk=job.pk)
    assert job.next_run == due + timedelta(seconds=60) and len(llm.requests) == 1
