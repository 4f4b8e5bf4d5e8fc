"""`manage.py hub_restore BACKUP_DIR [--replace]`: restore a hub_backup into HUB_DATA_DIR (hub.backups)."""

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from hub import backups
from hub.environment import env_str


class Command(BaseCommand):
    help = (
        "Restore a backup made by hub_backup into HUB_DATA_DIR. Every file's sha256 is checked first; a data "
        "dir that already holds a database is refused unless --replace, which moves the present database and "
        "files into <HUB_DATA_DIR>/replaced-<UTC time>/ (nothing is deleted). Stop the hub first."
    )
    # The destination database may not exist yet; nothing here may open it.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("backup", metavar="BACKUP_DIR", type=Path, help="A hub-backup-<time> directory.")
        parser.add_argument("--replace", action="store_true",
                            help="Move the data dir's present database and files aside, then restore.")

    def handle(self, *args, backup, replace, **options):
        try:
            database = backups.sqlite_database(instead=backups.RESTORE_ELSEWHERE)
            aside = backups.restore_backup(backup, Path(settings.DATA_DIR), database=database, replace=replace)
        except backups.BackupError as exc:
            raise CommandError(exc.message) from None
        manifest = backups.read_manifest(backup)
        self.stdout.write(f"Restored {backup.resolve()} ({manifest['created_at']}) into {settings.DATA_DIR}")
        self.stdout.write(backups.summary_line(manifest))
        if aside:
            self.stdout.write(f"The previous database and files are in {aside}")
        if env_str("SECRET_KEY"):
            self.stderr.write("SECRET_KEY is set in the environment, so the restored secret_key file is not used: set "
                              "SECRET_KEY to the key the backup was made with, or encrypted secrets cannot be read.")
