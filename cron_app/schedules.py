"""Each enabled cron job's django-q2 schedule, kept in step with the job.

A job's schedule is a one-off (`ONCE`) schedule set for the job's `next_run`: django-q2
deletes it when it fires, and the run puts it back for the following time. The job works
out its own times because django-q2 reads cron expressions in the server's time zone only
and counts intervals in whole minutes; a job's are in its own zone, and in seconds.
"""

from __future__ import annotations

import logging

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

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


def resync() -> int:
    """Put back the schedules of enabled jobs that lost theirs (a run that died before it
    re-armed its job, a schedule deleted in the admin); how many there were."""
    from django_q.models import Schedule

    names = set(
        Schedule.objects.filter(name__startswith="cron job ").values_list("name", flat=True)
    )
    lost = [
        job
        for job in CronJob.objects.filter(enabled=True, next_run__isnull=False)
        if schedule_name(job.pk) not in names
    ]
    for job in lost:
        sync(job)
    return len(lost)


@receiver(post_save, sender=CronJob, dispatch_uid="cron_job_saved")
def _saved(sender: type[CronJob], instance: CronJob, **kwargs: object) -> None:
    sync(instance)


@receiver(post_delete, sender=CronJob, dispatch_uid="cron_job_deleted")
def _deleted(sender: type[CronJob], instance: CronJob, **kwargs: object) -> None:
    from django_q.models import Schedule

    Schedule.objects.filter(name=schedule_name(instance.pk)).delete()
