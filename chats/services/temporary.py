"""Saving and removing temporary chats (chats.temporary)."""

from django.apps import apps
from django.db import transaction

from chats import events
from chats.models import Chat
from chats.temporary import chats as temporary_chats
from chats.temporary.scope import inside, outside
from hub.errors import Conflict


def _rows_of_chat(models, chat_id) -> list[tuple[type, list]]:
    """Every row of the chat in the current image, by model: the chat, then what points at it."""
    rows = [(Chat, list(Chat.objects.filter(pk=chat_id)))]
    for model in models:
        rows.append((model, list(model._default_manager.filter(chat_id=chat_id))))
    return rows


def _models_of_a_chat() -> list[type]:
    """The models whose rows belong to one chat (a `chat` foreign key that goes with it)."""
    found = []
    for model in apps.get_models():
        field = next((f for f in model._meta.concrete_fields if f.name == "chat"), None)
        if field is not None and field.is_relation and field.related_model is Chat and not field.null:
            found.append(model)
    return found


def save_chat(*, chat: Chat) -> Chat:
    """Turn a temporary chat into a stored one, with everything in it: messages, threads, notes,
    memberships and finished runs, under the same ids (its address and open tabs keep working).
    Sends chat.saved to its tabs and directory.updated to its owner's. A stored chat is returned
    as it is (saving twice is no change).

    Raises Conflict while one of its replies is still being written.
    """
    if not temporary_chats.exists(chat.pk):
        return chat
    live = apps.get_model("agents_app", "Run").LIVE
    with inside(chat.pk), transaction.atomic():  # the image's lock: nothing lands meanwhile
        rows = _rows_of_chat(_models_of_a_chat(), chat.pk)
        if any(getattr(row, "status", None) in live for model, objects in rows
               if model._meta.label == "agents_app.Run" for row in objects):
            raise Conflict("A reply is still being written: save the chat when it has finished.")
        with outside(), transaction.atomic():
            for model, objects in rows:
                model._default_manager.bulk_create(objects)
            saved = Chat.objects.get(pk=chat.pk)
            events.broadcast_on_commit(events.chat_group(saved.pk), events.chat_saved(saved))
            events.broadcast_on_commit(events.user_group(saved.owner_id),
                                       events.directory_updated(saved, change="saved"))
        temporary_chats.remove(chat.pk, owner_id=chat.owner_id)
    return saved
