"""Agents may be allowed private addresses (shared ones, by staff); remotes' headers are encrypted."""

from django.db import migrations, models


def seal_headers(apps, schema_editor):
    from agents_app.secrets import seal_headers

    Remote = apps.get_model("agents_app", "Remote")
    for remote in Remote.objects.exclude(headers={}):
        remote.encrypted_headers = seal_headers(remote.headers or {})
        remote.save(update_fields=["encrypted_headers"])


def open_headers(apps, schema_editor):
    from agents_app.secrets import open_headers

    Remote = apps.get_model("agents_app", "Remote")
    for remote in Remote.objects.exclude(encrypted_headers=""):
        remote.headers = open_headers(remote.encrypted_headers) or {}
        remote.save(update_fields=["headers"])


class Migration(migrations.Migration):
    dependencies = [
        ("agents_app", "0007_run_created_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="agent",
            name="allow_private_network",
            field=models.BooleanField(
                default=False, help_text="Shared agents only: the base URL may be a private or local network address."
            ),
        ),
        migrations.AddField(
            model_name="remote",
            name="encrypted_headers",
            field=models.TextField(blank=True),
        ),
        migrations.RunPython(seal_headers, open_headers),
        migrations.RemoveField(model_name="remote", name="headers"),
    ]
