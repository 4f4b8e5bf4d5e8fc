"""Full-text search indexes (the SQL is in chats/search_sql.py)."""

from django.db import migrations

from chats.search_sql import POSTGRES, POSTGRES_REVERSE, SQLITE, SQLITE_REVERSE


def run(statements_by_vendor):
    def apply(apps, schema_editor):
        for statement in statements_by_vendor.get(schema_editor.connection.vendor, []):
            schema_editor.execute(statement)

    return apply


class Migration(migrations.Migration):
    dependencies = [("chats", "0003_trash")]
    operations = [
        migrations.RunPython(
            run({"postgresql": POSTGRES, "sqlite": SQLITE}),
            run({"postgresql": POSTGRES_REVERSE, "sqlite": SQLITE_REVERSE}),
        )
    ]
