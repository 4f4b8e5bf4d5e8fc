from django.apps import AppConfig


class AgentsAppConfig(AppConfig):
    name = "agents_app"
    verbose_name = "Agents"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # chats never imports agents_app: agents learn of new messages through chats' delivery
        # hook, and chats asks what only agents_app knows through its agent port.
        from agents_app import for_chats
        from agents_app.turns import delivery as turn_delivery
        from chats import agent_port, delivery

        delivery.subscribe(turn_delivery.on_message_delivered)
        delivery.on_cancel(turn_delivery.cancel_from_chat)
        agent_port.provide(for_chats)

        # Every worker (CLI or embedded) keeps a heartbeat row for the health page.
        from agents_app import workers
        from hub.celery import app

        workers.install(app)
