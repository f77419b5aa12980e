"""The worker's schedules call the job functions where they now live, `agent.job_functions`,
rather than by the names they had in `agent.doors.worker` (which still answers to them, for
tasks queued before)."""

from typing import Any

from django.db import migrations

OLD = "agent.doors.worker."
NEW = "agent.job_functions."


def rename(apps: Any, before: str, after: str) -> None:
    Schedule = apps.get_model("django_q", "Schedule")
    for schedule in Schedule.objects.filter(func__startswith=before):
        schedule.func = after + schedule.func[len(before) :]
        schedule.save(update_fields=["func"])


def forward(apps: Any, schema_editor: Any) -> None:
    rename(apps, OLD, NEW)


def backward(apps: Any, schema_editor: Any) -> None:
    rename(apps, NEW, OLD)


class Migration(migrations.Migration):
    dependencies = [
        ("cron_app", "0003_owner_required"),
        ("django_q", "0018_task_success_index"),
    ]

    operations = [migrations.RunPython(forward, backward)]
