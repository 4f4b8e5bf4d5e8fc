"""`manage.py runhub`: the whole hub in one process (Daphne, a Celery worker and beat).

The worker is supervised (hub.embedded.EmbeddedWorker): if it stops on its own, it is started
again after a pause and the log says so; Ctrl-C stops everything.
"""

import os

from django.conf import settings
from django.core.management.base import BaseCommand

from hub.environment import check_services_reachable


class Command(BaseCommand):
    help = "Serve HTTP and websockets with Daphne, with a Celery worker and beat in the same process."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument("--no-worker", action="store_true", help="Serve only; workers run elsewhere.")
        parser.add_argument("--concurrency", type=int, default=4, help="Threads of the in-process worker.")

    def handle(self, *args, host, port, no_worker, concurrency, **options):
        from daphne.endpoints import build_endpoint_description_strings
        from daphne.server import Server

        from hub.asgi import application
        from hub.embedded import EmbeddedBeat, EmbeddedWorker

        check_services_reachable()
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
