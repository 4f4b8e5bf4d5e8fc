"""On PostgreSQL the message search trigger no longer indexes a streaming reply's checkpoints; it
indexes the reply as it starts and again when its status changes (see chats/search_sql.py).

SQLite keeps its FTS5 triggers: an external-content FTS5 table must be told the exact old text on
every change, so skipping some would corrupt it.
"""

from django.db import migrations

from chats import search_sql


def rebuild_trigger(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for statement in search_sql.POSTGRES_MESSAGE_SEARCH:  # each one is safe to run again
        schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("chats", "0007_streaming_index_and_names")]
    # Going back leaves the newer trigger, which indexes everything the older one did but a
    # streaming reply's checkpoints.
    operations = [migrations.RunPython(rebuild_trigger, migrations.RunPython.noop)]
