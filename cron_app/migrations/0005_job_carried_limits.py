"""A job carries the tools of the turn that scheduled it, and what waited for a person there."""

import cron_app.models
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("cron_app", "0004_schedules_name_the_jobs_module"),
    ]

    operations = [
        migrations.AddField(
            model_name="cronjob",
            name="approve_tools",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text="Tools that waited for a person's yes in the turn that scheduled it, besides AGENT_APPROVE_TOOLS and the owner's: its runs, with no one to ask, refuse them.",
                validators=[cron_app.models.validate_tool_patterns],
            ),
        ),
        migrations.AddField(
            model_name="cronjob",
            name="tools",
            field=models.JSONField(
                blank=True,
                default=None,
                help_text='The only tools its runs may use, as the turn that scheduled it was limited to, e.g. ["read_file"]; empty (null): every tool.',
                null=True,
                validators=[cron_app.models.validate_tools],
            ),
        ),
    ]
