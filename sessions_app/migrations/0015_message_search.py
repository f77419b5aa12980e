"""On PostgreSQL, a GIN index over the words of the messages people read (theirs and the
agent's replies), which the search through a user's chats uses (`sessions_app.search`).
Other databases have no such index; the search reads them another way."""

from django.db import migrations

INDEX = "message_words_gin"
# The expression `SearchVector("content", config="simple")` compiles to, and the condition
# of `search.SEARCHED_ROLES`: the planner takes the index only for the very same ones.
CREATE = (
    f"CREATE INDEX IF NOT EXISTS {INDEX} ON sessions_app_message "
    "USING gin (to_tsvector('simple'::regconfig, COALESCE(content, ''))) "
    "WHERE role IN ('user', 'assistant')"
)
DROP = f"DROP INDEX IF EXISTS {INDEX}"


def create_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def drop_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):

    dependencies = [
        ('sessions_app', '0014_approvals'),
    ]

    operations = [
        migrations.RunPython(create_index, drop_index, elidable=False),
    ]
