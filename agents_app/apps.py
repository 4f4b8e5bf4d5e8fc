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
        from hub.celery import app, find_model_clients_in_use_with

        workers.install(app)
        # runhub's worker sets up, before the first turn, the model clients the agents use.
        find_model_clients_in_use_with(model_clients_of_agents)


def model_clients_of_agents() -> set[str]:
    """The model clients (hub.celery.MODEL_CLIENTS) the hub's agents use: each live agent's
    provider's, and MCP's when a remote exists."""
    from agents_app import selectors
    from hub.celery import CLIENT_OF_PROVIDER

    clients = {CLIENT_OF_PROVIDER.get(provider) for provider in selectors.model_providers_in_use()} - {None}
    if selectors.any_remote_exists():
        clients.add("mcp")
    return clients
