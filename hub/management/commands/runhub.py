"""`manage.py runhub`: the whole hub in one process (Daphne, a Celery worker and beat).

`make run` runs `runhub --migrate --ensure-admin`, so Django starts once: it migrates, makes the
first admin account, and serves, in one process.

The worker is supervised (hub.embedded.EmbeddedWorker): if it stops on its own, it is started
again after a pause and the log says so; Ctrl-C stops everything. The model clients are set up in
a thread of their own beside the migration (hub.embedded.ModelClientWarmUp), so a fresh hub's
first turn does not wait for them.
"""

import os

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from hub.environment import check_services_reachable


class Command(BaseCommand):
    help = "Serve HTTP and websockets with Daphne, with a Celery worker and beat in the same process."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument("--no-worker", action="store_true", help="Serve only; workers run elsewhere.")
        # A turn holds a worker thread while its reply streams (the thread mostly waits), so the
        # threads are how many conversations answer at once: with 4, a fifth user waited for a
        # whole reply before theirs began.
        parser.add_argument("--concurrency", type=int, default=64,
                            help="Threads of the in-process worker: replies streamed at once.")
        parser.add_argument("--migrate", action="store_true", help="Apply the database migrations first.")
        parser.add_argument("--ensure-admin", action="store_true",
                            help="Then run ensure_admin: the first admin account and the shared agents.")

    def handle(self, *args, host, port, no_worker, concurrency, migrate, ensure_admin, **options):
        from hub.embedded import ModelClientWarmUp

        check_services_reachable()
        warm_up = ModelClientWarmUp()
        if not no_worker:
            warm_up.start()  # beside the migration: a turn may be sent as soon as the first page is served
        if migrate:
            self.migrate()
        if ensure_admin:
            call_command("ensure_admin", stdout=self.stdout)
        warm_up.database_ready()
        if not no_worker:
            # What is left of it after the migration: served a few tenths of a second later, the
            # first page comes with a worker whose first turn calls its model at once.
            warm_up.wait_for_the_openai_client()
        self.serve(host, port, no_worker=no_worker, concurrency=concurrency)

    def migrate(self) -> None:
        """As `manage.py migrate`; it says so when there is something to apply (a first run takes seconds)."""
        executor = MigrationExecutor(connection)
        unapplied = executor.migration_plan(executor.loader.graph.leaf_nodes())
        if unapplied:
            self.stdout.write(f"Preparing the database ({len(unapplied)} migrations to apply)…")
        # Also with nothing to apply: its post-migrate checks (the SQLite search index) run each start.
        call_command("migrate", interactive=False, verbosity=0)

    def serve(self, host: str, port: int, *, no_worker: bool, concurrency: int) -> None:
        from daphne.endpoints import build_endpoint_description_strings
        from daphne.server import Server

        from hub.asgi import application
        from hub.embedded import EmbeddedBeat, EmbeddedWorker

        parts = []
        if not no_worker:
            parts = [EmbeddedWorker(concurrency=concurrency), EmbeddedBeat()]
        for part in parts:
            part.start()
        mode = "embedded (SQLite, in-memory broker)" if settings.EMBEDDED else "PostgreSQL/Redis from the environment"
        shown_host = f"[{host}]" if ":" in host else host
        self.stdout.write(f"Hub is serving at http://{shown_host}:{port}/ — {mode}. Press Ctrl-C to stop.")
        try:
            Server(
                application=application,
                endpoints=build_endpoint_description_strings(host=host, port=port),
                signal_handlers=True,
                verbosity=0,
            ).run()
        finally:
            for part in reversed(parts):
                part.stop()
            self.stdout.write("Hub stopped.")
