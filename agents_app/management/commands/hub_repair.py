"""`manage.py hub_repair [--fix]`: find (and with --fix, repair) broken state, as a table."""

from django.core.management.base import BaseCommand, CommandError

from agents_app.repair import CHECK_KEYS, run_repair


class Command(BaseCommand):
    help = (
        "Report no live worker while runs wait for one, runs queued too long, streaming messages with no live "
        "run, runs running past their lease, runs never sent to a worker, memberships of deleted agents, chats "
        "whose preview or updated time disagrees with their messages, and search rows out of step. A dry run "
        "(the default) only reads; --fix repairs what the hub can (a missing worker is for you to start). "
        "Exits 1 while problems are left."
    )

    def add_arguments(self, parser):
        parser.add_argument("--fix", action="store_true", help="Repair what is found (default: only report).")
        parser.add_argument("--check", action="append", choices=CHECK_KEYS, dest="checks", metavar="NAME",
                            help=f"Only this check (repeatable): {', '.join(CHECK_KEYS)}.")
        parser.add_argument("--as", dest="username", metavar="USERNAME",
                            help="Record each fix in the admin's history (LogEntry) as this staff user.")
        parser.add_argument("--width", type=int, default=120, help="Width of the table (default 120).")

    def handle(self, *args, fix, checks, username, width, **options):
        on_fixed = None
        if username:
            from django.contrib.auth import get_user_model

            from agents_app.repair.audit import record_fix

            user = get_user_model().objects.filter(username=username, is_staff=True).first()
            if user is None:
                raise CommandError(f"--as: no staff user {username!r}")

            def on_fixed(finding):
                record_fix(user=user, finding=finding)

        report = run_repair(fix=fix, only=checks, on_fixed=on_fixed)
        self.stdout.write(report.as_table(width=width))
        if not report.healthy:
            raise CommandError("problems are left" if fix else "problems found (dry run)", returncode=1)
