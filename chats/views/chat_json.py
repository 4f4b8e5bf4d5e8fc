"""The chat page's JSON endpoints: thin, each one selector or one service.

Errors have the one shape {"error": {"code", "message", "fields"}}; another user's chat, message
or agent answers 404. Writes are POST with the CSRF token in the X-CSRFToken header.
"""

from datetime import datetime

from django.http import JsonResponse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from chats import agent_port, events, selectors, services
from chats.temporary import chats as temporary_chats
from chats.temporary.scope import outside
from chats.views import state
from hub import input as hub_input
from hub import unavailable
from hub.api.errors import error_body
from hub.errors import HubError, InvalidInput, NotFound


def error_response(exc: HubError) -> JsonResponse:
    return JsonResponse(exc.as_dict(), status=exc.status)


def json_body(request) -> dict:
    """The body as a JSON object, parsed strictly (hub.input): a refused text or number is an
    InvalidInput naming its field."""
    try:
        body = hub_input.loads(request.body or b"{}")
    except ValueError:
        raise InvalidInput.for_field("body", "must be a JSON object") from None
    if not isinstance(body, dict):
        raise InvalidInput.for_field("body", "must be a JSON object")
    return body


def hub_json(view):
    """Log-in required (a JSON 404 otherwise, never a redirect page), HubError as JSON, and the
    database or Redis not answering as 503 `unavailable` with Retry-After (hub.unavailable)."""

    def wrapped(request, *args, **kwargs):
        try:
            # Inside the try: reading the user reads the session, from the database.
            if not request.user.is_authenticated:
                return JsonResponse(error_body("not_authenticated", "log in first"), status=401)
            return view(request, *args, **kwargs)
        except HubError as exc:
            return error_response(exc)
        except Exception as exc:
            outage = unavailable.as_hub_error(exc, write=unavailable.is_write(request))
            if outage is None:
                raise
            return unavailable.json_answer(outage)

    wrapped.__name__ = view.__name__
    wrapped.__doc__ = view.__doc__
    return wrapped


def _chat(request, chat_id, *, include_deleted: bool = False):
    return selectors.chat_for_user(user=request.user, chat_id=chat_id, include_deleted=include_deleted)


def _int_param(request, name: str) -> int | None:
    value = request.GET.get(name)
    if value in (None, ""):
        return None
    try:
        return int(value)
    except ValueError:
        raise InvalidInput.for_field(name, "must be a message id") from None


def _time_param(request, name: str):
    try:
        moment = datetime.fromisoformat(request.GET[name])
    except ValueError:
        raise InvalidInput.for_field(name, "must be an ISO 8601 time") from None
    if moment.tzinfo is None:
        raise InvalidInput.for_field(name, "must have a time zone")
    return moment


def _thread_param(request, chat):
    """?thread=<id> or ?thread=main (the default thread); absent means the whole chat."""
    value = request.GET.get("thread")
    if value is None:
        return False, None
    if value == "main":
        return True, None
    return True, selectors.thread_for_chat(chat=chat, thread_id=value).pk


@require_GET
@hub_json
def directory(request):
    """A page of the user's chats (or their trash, or archive), newest first: ?q=, ?trash=1,
    ?archived=1, ?folder=<id>, ?tag=<name>, ?before=<cursor>."""
    try:
        limit = int(request.GET.get("limit", 50))
    except ValueError:
        raise InvalidInput.for_field("limit", "must be a number") from None
    folder_id, tag_name = request.GET.get("folder"), request.GET.get("tag")
    page = selectors.directory_page(
        user=request.user, limit=limit, before=request.GET.get("before") or None,
        search=request.GET.get("q", ""), trash=request.GET.get("trash") == "1",
        archived=request.GET.get("archived") == "1",
        folder=selectors.folder_for_user(user=request.user, folder_id=folder_id) if folder_id else None,
        tag=selectors.tag_for_user(user=request.user, name=tag_name) if tag_name else None,
    )
    return JsonResponse(state.directory_payload(page))


@require_GET
@hub_json
def message_search(request):
    """The user's messages and notes that match ?q=, best first, for the sidebar's search."""
    from chats import search

    hits = search.search_messages(owner=request.user, query=request.GET.get("q", ""), limit=12)
    return JsonResponse({"messages": [hit.as_dict() for hit in hits]})


@require_GET
@hub_json
def chat_state(request, chat_id):
    """The chat as the page opens it (what a fresh load embeds), for moving between chats."""
    return JsonResponse(state.chat_state(_chat(request, chat_id)))


@require_GET
@hub_json
def chat_threads(request, chat_id):
    """Every thread's preview, and the chat and its members: what a reconnecting tab refreshes."""
    chat = _chat(request, chat_id)
    return JsonResponse({"chat": events.chat_payload(chat), "members": services.members_payload(chat),
                         "threads": state.threads_payload(chat)})


@require_GET
@hub_json
def chat_messages(request, chat_id):
    """Pages of messages: ?before=<id> pages back, ?after=<id> catches up (oldest first),
    ?ids=1,2,3 refetches known messages; ?thread=<id>|main keeps to one thread; ?edited_after=<time>
    gives the messages edited since then (with "now", the time to ask from next)."""
    chat = _chat(request, chat_id)
    if "edited_after" in request.GET:
        since = _time_param(request, "edited_after")
        now = timezone.now()
        messages = selectors.messages_edited_since(chat=chat, since=since)
        return JsonResponse({**state.message_page_payload(chat=chat, messages=messages, has_more=False),
                             "now": now.isoformat()})
    if "ids" in request.GET:
        try:
            ids = [int(i) for i in request.GET["ids"].split(",") if i]
        except ValueError:
            raise InvalidInput.for_field("ids", "must be message ids separated by commas") from None
        messages = selectors.messages_by_ids(chat=chat, ids=ids)
        return JsonResponse(state.message_page_payload(chat=chat, messages=messages, has_more=False))
    before, after = _int_param(request, "before"), _int_param(request, "after")
    one_thread, thread_id = _thread_param(request, chat)
    if one_thread and after is None:
        messages, has_more = selectors.message_page(chat=chat, thread_id=thread_id, before_id=before)
    else:
        messages, has_more = selectors.message_page(chat=chat, before_id=before, after_id=after)
    return JsonResponse(state.message_page_payload(chat=chat, messages=messages, has_more=has_more))


@hub_json
def chat_create(request):
    """Create a chat: {"title"?, "description"?, "picture"?, "agents"?: [agent ids], "temporary"?}
    (the page posts JSON to the new-chat form's address)."""
    body = json_body(request)
    agent_ids = body.get("agents", [])
    if not isinstance(agent_ids, list):
        raise InvalidInput.for_field("agents", "must be a list of agent ids")
    members = [agent_port.agents().agent_named_in_field(user=request.user, agent_id=agent_id, field="agents")
               for agent_id in agent_ids]
    temporary = body.get("temporary", False)
    if not isinstance(temporary, bool):
        raise InvalidInput.for_field("temporary", "must be true or false")
    chat = services.create_chat(owner=request.user, title=body.get("title"), description=body.get("description"),
                                picture=body.get("picture"), agents=members, temporary=temporary)
    with temporary_chats.place_of(chat.pk):
        return JsonResponse(state.chat_state(chat), status=201)


@require_POST
@hub_json
def chat_update(request, chat_id):
    """Rename a chat, or change its description or picture: {"title"?, "description"?, "picture"?}."""
    chat = _chat(request, chat_id)  # first: another user's chat is a 404 whatever the body holds
    body = json_body(request)
    fields = {name: body[name] for name in ("title", "description", "picture") if name in body}
    if isinstance(fields.get("title"), str) and not fields["title"].strip():
        raise InvalidInput.for_field("title", "may not be empty")
    chat = services.update_chat(chat=chat, **fields)
    return JsonResponse({"chat": events.chat_payload(chat)})


@require_POST
@hub_json
def chat_delete(request, chat_id):
    """Move a chat to the trash (its open tabs close with a notice)."""
    chat = services.delete_chat(chat=_chat(request, chat_id))
    return JsonResponse({"chat": events.chat_payload(chat)})


@require_POST
@hub_json
def chat_save(request, chat_id):
    """Keep a temporary chat: it is stored, with everything in it, under the same address."""
    chat = services.save_chat(chat=_chat(request, chat_id))
    with outside():  # the chat is in the database now, whatever this request began on
        return JsonResponse(state.chat_state(chat))


@require_POST
@hub_json
def chat_restore(request, chat_id):
    """Bring a chat back from the trash, with the members it had."""
    chat = services.restore_chat(chat=_chat(request, chat_id, include_deleted=True))
    return JsonResponse({"chat": events.chat_payload(chat)})


def _agent(request, agent_id):
    return agent_port.agents().agent_named_in_field(user=request.user, agent_id=agent_id, field="agent_id")


@require_POST
@hub_json
def member_add(request, chat_id):
    """Add an agent to the chat: {"agent_id": 3}. Adding a member again changes nothing."""
    chat = _chat(request, chat_id)
    services.add_member(chat=chat, agent=_agent(request, json_body(request).get("agent_id")))
    return JsonResponse({"members": services.members_payload(chat)})


@require_POST
@hub_json
def member_remove(request, chat_id, agent_id):
    chat = _chat(request, chat_id)
    # The agent is in the path, not a field: another user's (or no) agent is a 404, as for the chat.
    services.remove_member(chat=chat, agent=agent_port.agents().agent_for_user(user=request.user, agent_id=agent_id))
    return JsonResponse({"members": services.members_payload(chat)})


@require_POST
@hub_json
def remote_attach(request, chat_id):
    """Attach one of the user's remotes to a thread: {"remote_id", "thread_id"} (null: the default
    thread) or {"remote_id", "new_thread_title"} to start a thread with it."""
    chat = _chat(request, chat_id)
    body = json_body(request)
    try:
        remote = agent_port.agents().remote_for_user(user=request.user, remote_id=body.get("remote_id"))
    except NotFound:
        raise InvalidInput.for_field("remote_id", f"no remote {body.get('remote_id')}") from None
    thread_id = body.get("thread_id")
    thread = selectors.thread_for_chat(chat=chat, thread_id=thread_id) if thread_id is not None else None
    message = agent_port.agents().attach_remote(chat=chat, remote=remote, thread=thread,
                                     new_thread_title=body.get("new_thread_title"))
    return JsonResponse({"message": events.message_payload(message)}, status=201)


@require_POST
@hub_json
def message_resubmit(request, chat_id, message_id):
    """Edit the user's message and have the agents answer it again: {"content"}."""
    message = selectors.message_for_chat(chat=_chat(request, chat_id), message_id=message_id)
    content = json_body(request).get("content")
    if not isinstance(content, str):
        raise InvalidInput.for_field("content", "must be text")
    return JsonResponse({"message": events.message_payload(services.resubmit_message(message=message,
                                                                                     content=content))})


@require_POST
@hub_json
def message_feedback(request, chat_id, message_id):
    """A thumb on an agent's reply: {"rating": "up" | "down" | null}."""
    message = selectors.message_for_chat(chat=_chat(request, chat_id), message_id=message_id)
    rating = json_body(request).get("rating")
    return JsonResponse({"message": events.message_payload(services.rate_reply(message=message, rating=rating))})


@require_POST
@hub_json
def message_regenerate(request, chat_id, message_id):
    """Answer the same question again, streamed into the same reply (the old text is kept)."""
    message = selectors.message_for_chat(chat=_chat(request, chat_id), message_id=message_id)
    run = agent_port.agents().regenerate(message=message)
    return JsonResponse({"run": events.run_payload(run)}, status=202)

