"""Runs keep the provider's token counts in columns, with whose chat it was, so a user's tokens sum
per agent and per day from an index; earlier runs get theirs from their usage and their chat. A
temporary chat's runs (in the chat's image) leave theirs in TemporaryChatUsage."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def fill_in_earlier_runs(apps, schema_editor):
    Run = apps.get_model("agents_app", "Run")
    Chat = apps.get_model("chats", "Chat")
    Run.objects.filter(owner__isnull=True).update(
        owner_id=Subquery(Chat.objects.filter(pk=OuterRef("chat_id")).values("owner_id")[:1]))
    counted = Run.objects.exclude(usage={}).only("pk", "usage")
    for run in counted.iterator(chunk_size=1000):
        usage = run.usage if isinstance(run.usage, dict) else {}
        Run.objects.filter(pk=run.pk).update(input_tokens=_count(usage.get("input_tokens")),
                                             output_tokens=_count(usage.get("output_tokens")))


def _count(value) -> int:
    return value if isinstance(value, int) and value > 0 else 0


class Migration(migrations.Migration):

    dependencies = [
        ('agents_app', '0010_builtin_avatars_as_initials'),
        ('chats', '0012_organize_share_transfer'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='input_tokens',
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='run',
            name='model',
            field=models.CharField(blank=True, help_text='The model name the provider reported.', max_length=200),
        ),
        migrations.AddField(
            model_name='run',
            name='output_tokens',
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='run',
            name='owner',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL, db_index=False),
        ),
        migrations.AddIndex(
            model_name='run',
            index=models.Index(fields=['owner', 'finished_at'], include=('input_tokens', 'output_tokens'), name='run_owner_finished'),
        ),
        migrations.CreateModel(
            name='TemporaryChatUsage',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('run_id', models.UUIDField(unique=True)),
                ('finished_at', models.DateTimeField()),
                ('model', models.CharField(blank=True, help_text='The model name the provider reported.',
                                           max_length=200)),
                ('input_tokens', models.PositiveBigIntegerField(default=0)),
                ('output_tokens', models.PositiveBigIntegerField(default=0)),
                ('agent', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+',
                                            to='agents_app.agent')),
                ('owner', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                            related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'verbose_name_plural': 'temporary chat usage',
                'indexes': [models.Index(fields=['owner', 'finished_at'], include=('input_tokens', 'output_tokens'),
                                         name='temporary_usage_owner_finished')],
            },
        ),
        migrations.RunPython(fill_in_earlier_runs, migrations.RunPython.noop),
    ]
