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
    """The models whose rows belong to one chat (a `chat` foreign key that goes with it); a proxy
    model's rows are its concrete model's, copied once."""
    found = []
    for model in apps.get_models():
        if model._meta.proxy:
            continue
        field = next((f for f in model._meta.concrete_fields if f.name == "chat"), None)
        if field is not None and field.is_relation and field.related_model is Chat and not field.null:
            found.append(model)
    return found


def _renumbered(model) -> bool:
    """Whether the model's rows get new ids in the database (an integer id from a sequence)."""
    return model._meta.pk.get_internal_type() in ("AutoField", "BigAutoField")


def _store(rows: list[tuple[type, list]]) -> None:
    """Insert an image's rows into the database. Rows with integer ids get the database's next
    ids, so a saved chat's messages keep their order with those written later; references
    between them follow. A reference to a row inserted later (a reply to a message) is set
    once that row is in."""
    new_ids: dict[type, dict] = {model: {} for model, _ in rows if _renumbered(model)}
    later = []  # (model, object, field, old id)
    for model, objects in rows:
        for obj in objects:
            for field in model._meta.concrete_fields:
                target = field.related_model if field.is_relation else None
                if target not in new_ids or getattr(obj, field.attname) is None:
                    continue
                old = getattr(obj, field.attname)
                if old in new_ids[target]:
                    setattr(obj, field.attname, new_ids[target][old])
                else:
                    later.append((model, obj, field, old))
                    setattr(obj, field.attname, None)
        old_ids = [obj.pk for obj in objects]
        if model in new_ids:
            for obj in objects:
                obj.pk = None
        model._default_manager.bulk_create(objects)
        if model in new_ids:
            new_ids[model].update(zip(old_ids, (obj.pk for obj in objects), strict=True))
    for model, obj, field, old in later:
        model._default_manager.filter(pk=obj.pk).update(**{field.attname: new_ids[field.related_model][old]})


def _in_saving_order(rows: list[tuple[type, list]]) -> list[tuple[type, list]]:
    """The chat first, then rows with integer ids (those others refer to first), then the rest."""
    renumbered = {model for model, _ in rows if _renumbered(model)}

    def rank(entry):
        model = entry[0]
        if model is Chat:
            return (0, 0)
        refers = sum(1 for f in model._meta.concrete_fields
                     if f.is_relation and f.related_model in renumbered and f.related_model is not model)
        return (1, refers) if model in renumbered else (2, 0)

    return sorted(rows, key=rank)


def expire_temporary_chats() -> int:
    """Tell the tabs of each temporary chat whose time ran out that it is gone (chat.deleted to
    its tabs, directory.updated to its owner's) and forget it. Returns how many. Beat runs it."""

    def tell(owner_id, chat_id):
        gone, listed = events.temporary_chat_expired(chat_id)
        events.broadcast_now(events.chat_group(chat_id), gone)
        events.broadcast_now(events.user_group(owner_id), listed)

    return temporary_chats.expire(on_expired=tell)


def save_chat(*, chat: Chat) -> Chat:
    """Turn a temporary chat into a stored one, with everything in it: messages, threads, notes,
    memberships and finished runs. The chat keeps its id, so its address and open sockets go on
    working; its messages and threads get the database's next ids (the page reloads them on
    chat.saved). Sends chat.saved to its tabs and directory.updated to its owner's. A stored chat
    is returned as it is (saving twice is no change).

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
            _store(_in_saving_order(rows))
            saved = Chat.objects.get(pk=chat.pk)
            events.broadcast_on_commit(events.chat_group(saved.pk), events.chat_saved(saved))
            events.broadcast_on_commit(events.user_group(saved.owner_id),
                                       events.directory_updated(saved, change="saved"))
        temporary_chats.remove(chat.pk, owner_id=chat.owner_id)
    return saved
