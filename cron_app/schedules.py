"""Each enabled cron job's django-q2 schedule, kept in step with the job.

A job's schedule is a one-off (`ONCE`) schedule set for the job's `next_run`: django-q2
deletes it when it fires, and the run puts it back for the following time. The job works
out its own times because django-q2 reads cron expressions in the server's time zone only
and counts intervals in whole minutes; a job's are in its own zone, and in seconds.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from django.utils import timezone

from cron_app.models import CronJob

logger = logging.getLogger(__name__)

# The worker's task that runs a job (a door; named, not imported, so the data stays below).
RUN_TASK = "agent.doors.worker.run_cron_job"


def schedule_name(job_id: int) -> str:
    return f"cron job {job_id}"


def sync(job: CronJob) -> None:
    """The job's schedule exists, for `next_run`, exactly while the job is enabled and has
    a next run."""
    from django_q.models import Schedule  # the worker's models, loaded when first needed

    name = schedule_name(job.pk)
    if not job.enabled or job.next_run is None:
        Schedule.objects.filter(name=name).delete()
        return
    Schedule.objects.update_or_create(
        name=name,
        defaults={
            "func": RUN_TASK,
            "args": repr((job.pk,)),
            "schedule_type": Schedule.ONCE,
            # Negative: django-q2 deletes the schedule once it fired; the run re-arms it.
            "repeats": -1,
            "next_run": job.next_run,
        },
    )


# How long a job's run may wait in the worker's queue after its schedule fired before the
# sweep takes it for lost (its worker died before re-arming the job).
LOST_AFTER = timedelta(minutes=10)


def resync() -> int:
    """Put back the schedules of enabled jobs that lost theirs; how many there were. A job
    whose time is still to come lost it in the admin; one overdue for long, with a run that
    died before it could plan the next (it is planned from now). A job that is only just
    due has no schedule because it fired: its run, maybe still queued, plans the next."""
    from django_q.models import Schedule

    names = set(
        Schedule.objects.filter(name__startswith="cron job ").values_list("name", flat=True)
    )
    candidates = CronJob.objects.filter(enabled=True, next_run__isnull=False)
    lost = [job.pk for job in candidates.only("pk") if schedule_name(job.pk) not in names]
    now = timezone.now()
    put_back = 0
    for job_id in lost:
        with transaction.atomic():
            job = CronJob.objects.select_for_update().filter(pk=job_id).first()
            if job is None or not job.enabled or job.next_run is None:
                continue
            if job.next_run > now:
                sync(job)
            elif job.next_run < now - LOST_AFTER:
                job.plan_after(job.next_run, now)
                job.save(update_fields=["next_run", "updated"])
            else:
                continue
            put_back += 1
    return put_back


@receiver(post_save, sender=CronJob, dispatch_uid="cron_job_saved")
def _saved(sender: type[CronJob], instance: CronJob, **kwargs: object) -> None:
    sync(instance)


@receiver(post_delete, sender=CronJob, dispatch_uid="cron_job_deleted")
def _deleted(sender: type[CronJob], instance: CronJob, **kwargs: object) -> None:
    from django_q.models import Schedule

    Schedule.objects.filter(name=schedule_name(instance.pk)).delete()
