from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0010_run_trace"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="tools",
            field=models.JSONField(blank=True, default=None, null=True),
        ),
    ]
