"""`Run.heartbeat` is called `last_alive` in the code (the heartbeat is the user's
HEARTBEAT.md); its column keeps its name, so the database is not touched."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0008_message_seq_stopped_session_turn"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RenameField(model_name="run", old_name="heartbeat", new_name="last_alive"),
                migrations.AlterField(
                    model_name="run",
                    name="last_alive",
                    field=models.DateTimeField(blank=True, db_column="heartbeat", null=True),
                ),
            ],
            database_operations=[],
        ),
    ]
