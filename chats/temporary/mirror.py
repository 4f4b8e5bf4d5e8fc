"""Copies, in a temporary chat's image, of the rows its own rows refer to.

A chat's rows point at its owner and at agents; the ORM joins them (a membership with its agent,
a run with its agent and chat). The image therefore holds a copy of its owner and of the agents
and remotes the owner may use, taken from the hub's database when the chat is made and brought
up to date (`bring_up_to_date`) before each page, API call and task on the chat. Secrets stay
behind: the copied owner has no password and the copied remotes no headers; what needs a secret
reads it from the hub's database (scope.outside()).

Shared memory is not copied: it is read from the hub's database (chats.memory), and an agent in
a temporary chat does not change it (chats.memory refuses, and says why). Writes to the copies
stay in the image and are lost with it.
"""

from django.contrib.auth import get_user_model
from django.db import connections, transaction

from chats import agent_port
from chats.temporary.scope import outside


def _hub_rows(owner_id: int) -> list[tuple[type, list]]:
    with outside():
        user = get_user_model().objects.get(pk=owner_id)
        user.password = "!"
        return [(get_user_model(), [user]), *agent_port.agents().rows_for_temporary_chat(owner_id=owner_id)]


def _kept_fields(model) -> list[str]:
    # Times set on insert (auto_now, auto_now_add) differ in a copy; the password is never copied.
    return [f.attname for f in model._meta.concrete_fields
            if not getattr(f, "auto_now", False) and not getattr(f, "auto_now_add", False)
            and f.attname != "password"]


def _as_compared(model, objects) -> list[tuple]:
    fields = _kept_fields(model)
    return sorted(tuple(getattr(obj, name) for name in fields) for obj in objects)


def refresh(owner_id: int, *, only_if_changed: bool = False) -> bool:
    """Replace the copies in the current temporary chat's image with the hub's rows of now;
    with only_if_changed, only when they differ (then nothing is stored). Returns whether it
    wrote."""
    rows = _hub_rows(owner_id)
    if only_if_changed and all(_as_compared(model, objects) == _as_compared(model, model.objects.all())
                               for model, objects in rows):
        return False
    with transaction.atomic():
        with connections["default"].cursor() as cursor:
            for model, _ in rows:
                # Plain SQL: the ORM's delete would cascade into the chat's own rows.
                cursor.execute(f'DELETE FROM "{model._meta.db_table}"')
        for model, objects in rows:
            model.objects.bulk_create(objects)
    return True


def bring_up_to_date(chat_id) -> None:
    """Inside chat_id's image: its copies as the hub's rows are now (an agent made or changed
    since the chat was), before a page, an API call or a task works on it."""
    from chats.models import Chat

    owner_id = Chat.objects.filter(pk=chat_id).values_list("owner_id", flat=True).first()
    if owner_id is not None:
        refresh(owner_id, only_if_changed=True)
