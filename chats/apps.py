from django.apps import AppConfig


class ChatsConfig(AppConfig):
    name = "chats"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from django.db.models.signals import post_delete, post_migrate, post_save

        # Registers hub_owner_words on every SQLite connection: the search triggers call it.
        from chats import search_sql  # noqa: F401
        from chats.services.attachments import delete_stored_file
        from chats.temporary import chats as temporary_chats

        # Tasks sent from a temporary chat run on its image (its Celery signal handlers).
        from chats.temporary import tasks  # noqa: F401
        from chats.temporary.scope import outside
        from hub import own_database

        # The hub's own rows (API tokens) are read from its database, even from a temporary chat.
        own_database.provide(outside)
        # A run made in a temporary chat is noted, for the API's URLs that name a run alone.
        post_save.connect(temporary_chats.note_new_run, sender="agents_app.Run", weak=False)

        # A file's bytes go with its row, however the row goes (a purged chat, a deleted user).
        post_delete.connect(delete_stored_file, sender="chats.Attachment", weak=False)
        post_migrate.connect(_ensure_search_index, sender=self)


def _ensure_search_index(sender, using="default", **kwargs):
    from chats.search import ensure_sqlite_index

    ensure_sqlite_index(using)
