from django.db import migrations

# The built-in agents' emoji avatars showed as empty boxes where no colour emoji font is
# installed; without one, an agent's avatar is its initials on a colour of its own.
EMOJI_AVATARS = {"builtin:librarian": "📚"}


def initials_for_builtin_agents(apps, schema_editor):
    Agent = apps.get_model("agents_app", "Agent")
    for model, emoji in EMOJI_AVATARS.items():
        Agent.objects.filter(owner__isnull=True, model=model, avatar=emoji).update(avatar="")
    Agent.objects.filter(owner__isnull=True, name="Assistant", avatar="✨").update(avatar="")


class Migration(migrations.Migration):
    dependencies = [("agents_app", "0009_librarian_reads_files")]
    operations = [migrations.RunPython(initials_for_builtin_agents, migrations.RunPython.noop)]
