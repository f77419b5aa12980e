"""Tools that wait for a person: a run may wait (`Run.Status.WAITING`) on its calls'
answers (`Approval`); sessions and users add tools to the ones that wait, and a session
keeps the ones answered "always"."""

import django.db.models.deletion
import sessions_app.models
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0013_user_budgets"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="session",
            name="allowed_tools",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text="Tools answered 'always' in this session: they no longer wait here.",
                validators=[sessions_app.models.validate_tool_patterns],
            ),
        ),
        migrations.AddField(
            model_name="session",
            name="approve_tools",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text='Tools that wait for a person\'s yes in this session, besides the others (AGENT_APPROVE_TOOLS, the owner\'s, the skills\'): a list such as ["exec", "mcp_*"].',
                validators=[sessions_app.models.validate_tool_patterns],
            ),
        ),
        migrations.AlterField(
            model_name="run",
            name="status",
            field=models.CharField(
                choices=[
                    ("queued", "Queued"),
                    ("running", "Running"),
                    ("waiting", "Waiting"),
                    ("succeeded", "Succeeded"),
                    ("failed", "Failed"),
                    ("cancelled", "Cancelled"),
                ],
                db_index=True,
                default="queued",
                max_length=16,
            ),
        ),
        migrations.CreateModel(
            name="UserPreferences",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "approve_tools",
                    models.JSONField(
                        blank=True,
                        default=list,
                        help_text='Tools that wait for this user\'s yes in all their sessions: a list such as ["exec", "mcp_*"].',
                        validators=[sessions_app.models.validate_tool_patterns],
                    ),
                ),
                ("updated", models.DateTimeField(auto_now=True)),
                (
                    "user",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="agent_preferences",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "verbose_name_plural": "user preferences",
            },
        ),
        migrations.CreateModel(
            name="Approval",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("call_id", models.CharField(max_length=128)),
                ("name", models.CharField(max_length=128)),
                ("arguments", models.JSONField(blank=True, null=True)),
                ("position", models.PositiveIntegerField(default=0)),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("pending", "Pending"),
                            ("allowed", "Allowed"),
                            ("declined", "Declined"),
                            ("expired", "Expired"),
                            ("cancelled", "Cancelled"),
                        ],
                        db_index=True,
                        default="pending",
                        max_length=16,
                    ),
                ),
                ("always", models.BooleanField(default=False)),
                ("created", models.DateTimeField(auto_now_add=True)),
                ("deadline", models.DateTimeField()),
                ("answered", models.DateTimeField(blank=True, null=True)),
                (
                    "answered_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "run",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="approvals",
                        to="sessions_app.run",
                    ),
                ),
            ],
            options={
                "ordering": ["created", "position"],
                "indexes": [
                    models.Index(
                        fields=["status", "deadline"], name="sessions_ap_status_6c172c_idx"
                    )
                ],
                "constraints": [
                    models.UniqueConstraint(fields=("run", "call_id"), name="approval_call_per_run")
                ],
            },
        ),
    ]
