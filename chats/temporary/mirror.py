"""Copies, in a temporary chat's image, of the rows its own rows refer to.

A chat's rows point at its owner and at agents; the ORM joins them (a membership with its agent,
a run with its agent and chat). The image therefore holds a copy of its owner, of the agents and
remotes the owner may use and of the owner's memory blocks, taken from the hub's database when
the chat is made and again by `refresh` (before a turn reads them). Secrets stay behind: the
copied owner has no password and the copied remotes no headers; what needs a secret reads it
from the hub's database (scope.outside()).

Writes to the copies stay in the image and are lost with it: an agent in a temporary chat does
not change shared memory (chats.memory refuses, and says why).
"""

from django.contrib.auth import get_user_model
from django.db import connections, transaction

from chats import agent_port
from chats.models import ContextBlock
from chats.temporary.scope import outside


def _hub_rows(owner_id: int) -> list[tuple[type, list]]:
    with outside():
        user = get_user_model().objects.get(pk=owner_id)
        user.password = "!"
        return [
            (get_user_model(), [user]),
            *agent_port.agents().rows_for_temporary_chat(owner_id=owner_id),
            (ContextBlock, list(ContextBlock.objects.filter(owner_id=owner_id))),
        ]


def refresh(owner_id: int) -> None:
    """Replace the copies in the current temporary chat's image with the hub's rows of now."""
    rows = _hub_rows(owner_id)
    with transaction.atomic():
        with connections["default"].cursor() as cursor:
            for model, _ in rows:
                # Plain SQL: the ORM's delete would cascade into the chat's own rows.
                cursor.execute(f'DELETE FROM "{model._meta.db_table}"')
        for model, objects in rows:
            model.objects.bulk_create(objects)
