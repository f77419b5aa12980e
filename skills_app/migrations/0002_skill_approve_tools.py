"""A skill may name tools that wait for a person's yes while it is offered."""

import skills_app.models
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('skills_app', '0001_initial'),
    ]

    operations = [
        migrations.AddField(
            model_name='skill',
            name='approve_tools',
            field=models.JSONField(blank=True, default=list, help_text='Tools that wait for a person\'s yes while the skill is offered: a list such as ["exec", "mcp_*"].', validators=[skills_app.models.validate_tool_patterns]),
        ),
    ]
