"""`manage.py hub_backup [--output DIR]`: a consistent backup of an embedded hub (hub.backups)."""

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from hub import backups


class Command(BaseCommand):
    help = (
        "Back up an embedded hub while it runs: its SQLite database (SQLite's online backup API, checked with "
        "PRAGMA integrity_check), the data dir's other files and a manifest of their sha256, into a new "
        "hub-backup-<UTC time> directory under --output. On PostgreSQL, use pg_dump instead."
    )

    def add_arguments(self, parser):
        parser.add_argument("--output", metavar="DIR", type=Path,
                            help="Where the backup directory goes (default: <HUB_DATA_DIR>/backups).")

    def handle(self, *args, output, **options):
        try:
            backup = backups.make_backup(output or Path(settings.DATA_DIR) / "backups")
        except backups.BackupError as exc:
            raise CommandError(exc.message) from None
        manifest = backups.read_manifest(backup)
        self.stdout.write(str(backup))
        self.stdout.write(backups.summary_line(manifest))
        if manifest["secret_key"] == "environment":
            self.stderr.write("SECRET_KEY comes from the environment, not the backed-up secret_key file: keep a copy "
                              "of it with the backup, or encrypted secrets cannot be read after a restore.")
