"""Before a job's owner becomes required: a job without one goes to the first superuser
(whom `manage.py agent` also works as by default), or is deleted on a site without one;
and the one-off django-q2 schedule each job had is dropped, the dispatchers starting jobs
now (`cron_app.dispatch`)."""

from typing import Any

from django.db import migrations

RUN_TASK = "agent.doors.worker.run_cron_job"


def forward(apps: Any, schema_editor: Any) -> None:
    CronJob = apps.get_model("cron_app", "CronJob")
    User = CronJob._meta.get_field("owner").related_model
    Schedule = apps.get_model("django_q", "Schedule")
    ownerless = CronJob.objects.filter(owner__isnull=True)
    admin = User.objects.filter(is_superuser=True).order_by("pk").first()
    if admin is not None:
        ownerless.update(owner=admin)
    else:
        ownerless.delete()
    Schedule.objects.filter(name__startswith="cron job ", func=RUN_TASK).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("cron_app", "0001_initial"),
        ("django_q", "0018_task_success_index"),
    ]

    operations = [migrations.RunPython(forward, migrations.RunPython.noop)]
