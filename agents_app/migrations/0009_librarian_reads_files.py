from django.db import migrations

DESCRIPTION = ("Hub's built-in agent: finds what you said across your chats and what your files say, and keeps "
               "your shared memory. Works offline; it is not a language model.")


def librarian_reads_files(apps, schema_editor):
    """The Librarian searches the text of the user's files too (its search_files tool)."""
    Agent = apps.get_model("agents_app", "Agent")
    for librarian in Agent.objects.filter(owner__isnull=True, model="builtin:librarian"):
        tools = list(librarian.tools or [])
        if "search_files" not in tools:
            tools.insert(tools.index("search_messages") + 1 if "search_messages" in tools else 0, "search_files")
        librarian.tools = tools
        librarian.description = DESCRIPTION
        librarian.save(update_fields=["tools", "description"])


class Migration(migrations.Migration):
    dependencies = [("agents_app", "0008_security")]
    operations = [migrations.RunPython(librarian_reads_files, migrations.RunPython.noop)]
