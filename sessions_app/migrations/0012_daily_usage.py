"""The daily ledger of usage and cost (`DailyUsage`), filled from the runs already recorded,
each counted by the UTC day it ended."""

import datetime

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


TOKENS = ("prompt_tokens", "completion_tokens", "total_tokens")


def count_earlier_runs(apps, schema_editor):
    Run = apps.get_model("sessions_app", "Run")
    DailyUsage = apps.get_model("sessions_app", "DailyUsage")
    lines = {}
    finished = Run.objects.filter(finished__isnull=False).values_list(
        "session__owner_id", "finished", "model", "usage", "cost"
    )
    for owner_id, when, model, usage, cost in finished.iterator(chunk_size=2000):
        usage = usage if isinstance(usage, dict) else {}
        tokens = [int(usage.get(key) or 0) for key in TOKENS]
        if cost is None and not any(tokens):
            continue
        day = when.astimezone(datetime.timezone.utc).date()
        line = lines.setdefault(
            (owner_id, day, model[:200]),
            {"runs": 0, "priced_cost": 0, "unpriced_runs": 0, **dict.fromkeys(TOKENS, 0)},
        )
        line["runs"] += 1
        for key, value in zip(TOKENS, tokens):
            line[key] += value
        if cost is not None:
            line["priced_cost"] += cost
        else:
            line["unpriced_runs"] += 1
    DailyUsage.objects.bulk_create(
        DailyUsage(owner_id=owner_id, day=day, model=model, **line)
        for (owner_id, day, model), line in lines.items()
    )
    Run.objects.filter(finished__isnull=False).update(counted=True)


class Migration(migrations.Migration):

    dependencies = [
        ('sessions_app', '0011_run_tools'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='counted',
            field=models.BooleanField(default=False, editable=False),
        ),
        migrations.CreateModel(
            name='DailyUsage',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('day', models.DateField(help_text='The UTC day the runs ended.')),
                ('model', models.CharField(blank=True, max_length=200)),
                ('runs', models.PositiveIntegerField(default=0)),
                ('prompt_tokens', models.PositiveBigIntegerField(default=0)),
                ('completion_tokens', models.PositiveBigIntegerField(default=0)),
                ('total_tokens', models.PositiveBigIntegerField(default=0)),
                ('priced_cost', models.DecimalField(decimal_places=6, default=0, help_text='USD, of the runs whose model has a known price.', max_digits=14)),
                ('unpriced_runs', models.PositiveIntegerField(default=0, help_text='Runs that used tokens of a model with no known price.')),
                ('owner', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='agent_usage', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'verbose_name_plural': 'daily usage',
                'ordering': ['-day', 'model'],
                'constraints': [models.UniqueConstraint(fields=('owner', 'day', 'model'), name='usage_per_owner_day'), models.UniqueConstraint(condition=models.Q(('owner__isnull', True)), fields=('day', 'model'), name='usage_per_day_without_owner')],
            },
        ),
        migrations.RunPython(count_earlier_runs, migrations.RunPython.noop),
    ]
