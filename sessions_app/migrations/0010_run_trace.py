"""A run's trace (its model calls and tool calls), and the run or cron job that started it."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('cron_app', '0004_schedules_name_the_jobs_module'),
        ('sessions_app', '0009_run_last_alive'),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='cron_job',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='runs', to='cron_app.cronjob'),
        ),
        migrations.AddField(
            model_name='run',
            name='parent_run',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='subagents', to='sessions_app.run'),
        ),
        migrations.AddField(
            model_name='run',
            name='trace',
            field=models.JSONField(blank=True, default=list),
        ),
    ]
