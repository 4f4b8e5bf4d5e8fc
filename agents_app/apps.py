from django.apps import AppConfig


class AgentsAppConfig(AppConfig):
    name = "agents_app"
    verbose_name = "Agents"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Agents learn of new messages through chats' delivery hook; chats never imports us.
        from agents_app import turns
        from chats import delivery

        delivery.subscribe(turns.on_message_delivered)
        delivery.on_cancel(turns.cancel_from_chat)

        # Every worker (CLI or embedded) keeps a heartbeat row for the health page.
        from agents_app import workers
        from hub.celery import app

        workers.install(app)
