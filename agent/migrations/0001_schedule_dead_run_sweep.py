"""Schedule the sweep that marks failed the turns whose process died (`agent.jobs`)."""

from django.db import migrations

NAME = "Fail dead runs"


def schedule(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name=NAME,
        defaults={
            "func": "agent.jobs.fail_dead_runs",
            # Every 20 seconds; the worker looks at its schedules every 30.
            "schedule_type": "C",
            "cron": "* * * * * */20",
            "repeats": -1,
        },
    )


def unschedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
        ("sessions_app", "0004_session_key_per_owner"),
    ]

    operations = [migrations.RunPython(schedule, unschedule)]
