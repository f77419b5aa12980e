"""A run carries what waited for a person in the turn that started it."""

import sessions_app.models
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0015_message_search"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="approve_tools",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text="Tools that waited for a person in the turn that started this one, besides AGENT_APPROVE_TOOLS and the owner's: they wait in this turn too.",
                validators=[sessions_app.models.validate_tool_patterns],
            ),
        ),
    ]
