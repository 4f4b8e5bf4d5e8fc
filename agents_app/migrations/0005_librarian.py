from django.db import migrations

# A copy, not an import: a migration must not change when the code does.
LIBRARIAN = {
    "name": "Librarian",
    "avatar": "📚",
    "description": "Hub's built-in agent: finds what you said across your chats and keeps your shared memory. "
    "Works offline; it is not a language model.",
    "model": "builtin:librarian",
    "tools": ["search_messages", "list_chats", "read_memory", "remember"],
}


def add_librarian(apps, schema_editor):
    Agent = apps.get_model("agents_app", "Agent")
    if not Agent.objects.filter(owner__isnull=True, model="builtin:librarian").exists():
        Agent.objects.create(owner=None, **LIBRARIAN)


class Migration(migrations.Migration):
    dependencies = [("agents_app", "0004_provider_keys")]
    operations = [migrations.RunPython(add_librarian, migrations.RunPython.noop)]
