from django.apps import AppConfig


class ChatsConfig(AppConfig):
    name = "chats"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from django.db.models.signals import post_migrate

        # Registers hub_owner_words on every SQLite connection: the search triggers call it.
        from chats import search_sql  # noqa: F401

        # Tasks sent from a temporary chat run on its image (its Celery signal handlers).
        from chats.temporary import tasks  # noqa: F401
        from chats.temporary.scope import outside
        from hub import own_database

        own_database.provide(outside)

        post_migrate.connect(_ensure_search_index, sender=self)


def _ensure_search_index(sender, using="default", **kwargs):
    from chats.search import ensure_sqlite_index

    ensure_sqlite_index(using)
