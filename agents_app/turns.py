"""How agents answer delivered messages (the durable turn machinery lives in runs.py)."""


def on_message_delivered(*, message, agents) -> None:
    """Called inside send_message's transaction for each delivered message.

    Queues nothing yet: agent turns arrive with the durable-turn work.
    """
