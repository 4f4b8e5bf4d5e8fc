"""The page's JSON endpoints for keeping chats in order: pin, archive, folder and tags of a chat,
the user's folders, and "Branch from here". Thin: each one selector and one service.
"""

from django.http import JsonResponse
from django.views.decorators.http import require_http_methods, require_POST

from chats import events, selectors, services
from chats.views import state
from chats.views.chat_json import hub_json, json_body
from hub.errors import InvalidInput


def _chat(request, chat_id):
    return selectors.chat_for_user(user=request.user, chat_id=chat_id)


def _flag(body: dict, name: str) -> bool | None:
    value = body.get(name)
    if value is not None and not isinstance(value, bool):
        raise InvalidInput.for_field(name, "must be true or false")
    return value


def _name(body: dict) -> str:
    name = body.get("name")
    if not isinstance(name, str):
        raise InvalidInput.for_field("name", "must be text")
    return name


def _chat_answer(chat) -> JsonResponse:
    return JsonResponse({"chat": events.chat_payload(chat)})


@require_POST
@hub_json
def chat_organize(request, chat_id):
    """Pin, archive or file a chat: {"pinned"?: bool, "archived"?: bool, "folder_id"?: id | null,
    "tags"?: [names]} (what is left out stays as it is)."""
    chat = _chat(request, chat_id)  # first: another user's chat is a 404 whatever the body holds
    body = json_body(request)
    changes = {"pinned": _flag(body, "pinned"), "archived": _flag(body, "archived"), "tags": body.get("tags")}
    if "folder_id" in body:
        folder_id = body["folder_id"]
        changes["folder"] = None if folder_id is None else selectors.folder_for_user(
            user=request.user, folder_id=folder_id, field="folder_id")
    return _chat_answer(services.organize_chat(chat=chat, **changes))


@require_POST
@hub_json
def chat_tag_add(request, chat_id):
    """Put a tag on the chat by name: {"name"} (made on first use)."""
    chat = _chat(request, chat_id)
    return _chat_answer(services.tag_chat(chat=chat, name=_name(json_body(request))))


@require_POST
@hub_json
def chat_tag_remove(request, chat_id):
    """Take a tag off the chat by name: {"name"}."""
    chat = _chat(request, chat_id)
    return _chat_answer(services.untag_chat(chat=chat, name=_name(json_body(request))))


@require_http_methods(["GET", "POST"])
@hub_json
def folders(request):
    """GET: the user's folders and tags. POST {"name", "instructions"?}: a new folder."""
    if request.method == "GET":
        return JsonResponse({"folders": state.folders_payload(request.user),
                             "tags": selectors.tags_for_user(user=request.user)})
    body = json_body(request)
    folder = services.create_folder(owner=request.user, name=body.get("name"),
                                    instructions=body.get("instructions", ""))
    return JsonResponse({"folder": events.folder_payload(folder)}, status=201)


@require_POST
@hub_json
def folder_update(request, folder_id):
    """Rename a folder or set its instructions: {"name"?, "instructions"?}."""
    folder = selectors.folder_for_user(user=request.user, folder_id=folder_id)
    body = json_body(request)
    folder = services.update_folder(folder=folder, name=body.get("name"), instructions=body.get("instructions"))
    return JsonResponse({"folder": events.folder_payload(folder)})


@require_POST
@hub_json
def folder_delete(request, folder_id):
    """Delete a folder; its chats stay, in no folder."""
    services.delete_folder(folder=selectors.folder_for_user(user=request.user, folder_id=folder_id))
    return JsonResponse({"deleted": True})


@require_POST
@hub_json
def message_branch(request, chat_id, message_id):
    """"Branch from here": a new chat with everything up to this message; answers the new chat as
    the page opens it."""
    chat = _chat(request, chat_id)
    message = selectors.message_for_chat(chat=chat, message_id=message_id)
    fork = services.branch_chat(chat=chat, at_message=message)
    return JsonResponse(state.chat_state(fork), status=201)
