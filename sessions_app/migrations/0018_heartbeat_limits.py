"""The heartbeat keeps to the limits of the turn that last wrote the user's HEARTBEAT.md."""

import sessions_app.models
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0017_spending_holds"),
    ]

    operations = [
        migrations.AddField(
            model_name="userpreferences",
            name="heartbeat_approve_tools",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text="Tools that waited for a person in the turn that last wrote HEARTBEAT.md: the heartbeat, with no one to ask, refuses them.",
                validators=[sessions_app.models.validate_tool_patterns],
            ),
        ),
        migrations.AddField(
            model_name="userpreferences",
            name="heartbeat_tools",
            field=models.JSONField(
                blank=True,
                default=None,
                help_text="The only tools the heartbeat may use, as the turn that last wrote HEARTBEAT.md was limited to; empty (null): every tool.",
                null=True,
            ),
        ),
    ]
