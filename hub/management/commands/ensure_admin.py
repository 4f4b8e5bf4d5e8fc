"""Create the first admin account on the first run and say how to log in."""

import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create an admin account if no staff user exists, and print how to log in."

    def handle(self, *args, **options):
        from agents_app.services import ensure_builtin_agents

        for agent in ensure_builtin_agents():
            self.stdout.write(f"Added the shared agent {agent.name} ({agent.model}).")
        User = get_user_model()
        credentials = settings.DATA_DIR / "first-run-credentials.txt"
        if not User.objects.filter(is_superuser=True).exists():
            password = secrets.token_urlsafe(12)
            User.objects.create_superuser("admin", "", password)
            settings.DATA_DIR.mkdir(parents=True, exist_ok=True)
            credentials.write_text(f"username: admin\npassword: {password}\n")
            credentials.chmod(0o600)
        if credentials.exists():
            self.stdout.write(
                "Log in as:\n  " + credentials.read_text().strip().replace("\n", "\n  ")
                + f"\n(kept in {credentials}; delete it once you changed the password)"
            )
        else:
            self.stdout.write("Log in with your admin account (reset it with: manage.py changepassword admin).")
