from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0009_run_last_alive"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="tools",
            field=models.JSONField(blank=True, default=None, null=True),
        ),
    ]
