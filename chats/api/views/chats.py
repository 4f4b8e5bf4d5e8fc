"""Chats: the directory list, create, read, change, delete, restore, fork, export, import;
threads and members."""

from django.db import transaction
from django.db.models import prefetch_related_objects
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response

from chats import agent_port, events, selectors, services
from chats.api import serializers as s
from chats.temporary import chats as temporary_chats
from chats.temporary.scope import outside
from hub.api.views import ApiView, valid

CHAT_ID = OpenApiParameter("chat_id", OpenApiTypes.UUID, OpenApiParameter.PATH)


def chat_detail(chat) -> dict:
    if not temporary_chats.is_temporary_chat(chat):
        prefetch_related_objects([chat], "tags")  # the payload's tags
    return {**events.chat_payload(chat), "members": services.members_payload(chat),
            "threads": [events.thread_payload(t) for t in chat.threads.order_by("created_at", "id")]}


def own_chat(request, chat_id, **kwargs):
    return selectors.chat_for_user(user=request.user, chat_id=chat_id, **kwargs)


def usable_agent(request, agent_id, field: str):
    return agent_port.agents().agent_named_in_field(user=request.user, agent_id=agent_id, field=field)


class ChatListView(ApiView):
    @extend_schema(operation_id="chats_list", tags=["chats"], parameters=[s.ChatListQuery], responses=s.ChatPageOut,
                   summary="Your chats, most recently active first (cursor pages, search, trash)")
    def get(self, request):
        query = valid(s.ChatListQuery, request.query_params)
        folder = selectors.folder_for_user(user=request.user, folder_id=query["folder"]) if "folder" in query else None
        tag = selectors.tag_for_user(user=request.user, name=query["tag"]) if "tag" in query else None
        page = selectors.directory_page(user=request.user, limit=query["limit"], before=query.get("before"),
                                        search=query.get("q", ""), trash=query["trash"], archived=query["archived"],
                                        folder=folder, tag=tag)
        return Response({"results": [events.chat_payload(c) for c in page.chats], "next_cursor": page.next_cursor})

    @extend_schema(operation_id="chats_create", tags=["chats"], request=s.ChatIn, responses={201: s.ChatDetailOut},
                   summary="Make a chat, with agents as members")
    def post(self, request):
        data = valid(s.ChatIn, request.data)
        agents = [usable_agent(request, agent_id, "agent_ids") for agent_id in data.pop("agent_ids", [])]
        chat = services.create_chat(owner=request.user, agents=agents, **data)
        with temporary_chats.place_of(chat.pk):
            return Response(chat_detail(chat), status=201)


class ChatDetailView(ApiView):
    @extend_schema(operation_id="chats_retrieve", tags=["chats"], parameters=[CHAT_ID], responses=s.ChatDetailOut)
    def get(self, request, chat_id):
        return Response(chat_detail(own_chat(request, chat_id)))

    @extend_schema(operation_id="chats_update", tags=["chats"], parameters=[CHAT_ID], request=s.ChatPatch,
                   responses=s.ChatDetailOut,
                   summary="Rename a chat, change its description or picture, pin, archive, file or tag it")
    def patch(self, request, chat_id):
        chat = own_chat(request, chat_id)
        data = valid(s.ChatPatch, request.data)
        kept = {name: data.pop(name) for name in ("pinned", "archived", "tags") if name in data}
        if "folder" in data:
            folder_id = data.pop("folder")
            kept["folder"] = None if folder_id is None else selectors.folder_for_user(
                user=request.user, folder_id=folder_id, field="folder")
        with transaction.atomic():  # all the changes, or none
            if data or not kept:
                chat = services.update_chat(chat=chat, **data)
            if kept:
                chat = services.organize_chat(chat=chat, **kept)
        return Response(chat_detail(chat))

    @extend_schema(operation_id="chats_destroy", tags=["chats"], parameters=[CHAT_ID], responses={204: None},
                   summary="Move a chat to the trash (restore within HUB_TRASH_DAYS)")
    def delete(self, request, chat_id):
        services.delete_chat(chat=own_chat(request, chat_id))
        return Response(status=204)


class ChatRestoreView(ApiView):
    @extend_schema(operation_id="chats_restore", tags=["chats"], parameters=[CHAT_ID], request=None,
                   responses=s.ChatDetailOut, summary="Bring a chat back from the trash, with its members")
    def post(self, request, chat_id):
        chat = services.restore_chat(chat=own_chat(request, chat_id, include_deleted=True))
        return Response(chat_detail(chat))


class ChatSaveView(ApiView):
    @extend_schema(operation_id="chats_save", tags=["chats"], parameters=[CHAT_ID], request=None,
                   responses=s.ChatDetailOut, summary="Keep a temporary chat: store it, with everything in it")
    def post(self, request, chat_id):
        chat = services.save_chat(chat=own_chat(request, chat_id))
        with outside():  # the chat is in the database now, whatever this request began on
            return Response(chat_detail(chat))


class ChatForkView(ApiView):
    @extend_schema(operation_id="chats_fork", tags=["chats"], parameters=[CHAT_ID], request=s.ForkIn,
                   responses={201: s.ChatDetailOut}, summary="A new chat with the messages up to one message")
    def post(self, request, chat_id):
        chat = own_chat(request, chat_id)
        data = valid(s.ForkIn, request.data)
        from hub.errors import InvalidInput, NotFound

        try:
            message = selectors.message_for_chat(chat=chat, message_id=data["message_id"])
        except NotFound:
            raise InvalidInput.for_field("message_id", "is not a message of this chat") from None
        fork = services.fork_chat(chat=chat, at_message=message, title=data.get("title", ""))
        return Response(chat_detail(fork), status=201)


class ChatExportView(ApiView):
    @extend_schema(
        operation_id="chats_export", tags=["chats"], parameters=[CHAT_ID, s.ExportQuery],
        responses={(200, "application/json"): OpenApiTypes.OBJECT, (200, "text/markdown"): OpenApiTypes.STR},
        summary="Everything in a chat: JSON (the import format) or Markdown",
    )
    def get(self, request, chat_id):
        chat = own_chat(request, chat_id)
        query = valid(s.ExportQuery, request.query_params)
        if query["format"] == "markdown":
            return HttpResponse(services.export_markdown(chat), content_type="text/markdown; charset=utf-8")
        return Response(services.export_chat(chat))


class ChatImportView(ApiView):
    max_body_setting = "HUB_API_MAX_IMPORT_BYTES"

    @extend_schema(operation_id="chats_import", tags=["chats"], request=OpenApiTypes.OBJECT,
                   responses={201: s.ChatDetailOut},
                   summary="Make a chat from an export (the JSON of chats_export)")
    def post(self, request):
        return Response(chat_detail(services.import_chat(owner=request.user, data=request.data)), status=201)


class ThreadListView(ApiView):
    @extend_schema(operation_id="threads_list", tags=["threads"], parameters=[CHAT_ID], responses=s.ThreadListOut,
                   summary="A chat's named threads (messages without a thread are in its main thread)")
    def get(self, request, chat_id):
        chat = own_chat(request, chat_id)
        return Response({"results": [events.thread_payload(t) for t in chat.threads.order_by("created_at", "id")]})


class ThreadDetailView(ApiView):
    @extend_schema(operation_id="threads_retrieve", tags=["threads"],
                   parameters=[CHAT_ID, OpenApiParameter("thread_id", OpenApiTypes.INT, OpenApiParameter.PATH)],
                   responses=s.ThreadOut)
    def get(self, request, chat_id, thread_id):
        thread = selectors.thread_for_chat(chat=own_chat(request, chat_id), thread_id=thread_id)
        return Response(events.thread_payload(thread))


class MemberListView(ApiView):
    @extend_schema(operation_id="members_list", tags=["members"], parameters=[CHAT_ID], responses=s.MemberListOut)
    def get(self, request, chat_id):
        return Response({"results": services.members_payload(own_chat(request, chat_id))})

    @extend_schema(operation_id="members_create", tags=["members"], parameters=[CHAT_ID], request=s.MemberIn,
                   responses={201: s.MemberListOut}, summary="Add an agent to the chat (adding it again is fine)")
    def post(self, request, chat_id):
        chat = own_chat(request, chat_id)
        agent = usable_agent(request, valid(s.MemberIn, request.data)["agent_id"], "agent_id")
        services.add_member(chat=chat, agent=agent)
        return Response({"results": services.members_payload(chat)}, status=201)


class MemberDetailView(ApiView):
    @extend_schema(operation_id="members_destroy", tags=["members"],
                   parameters=[CHAT_ID, OpenApiParameter("agent_id", OpenApiTypes.INT, OpenApiParameter.PATH)],
                   responses={204: None}, summary="Remove an agent from the chat")
    def delete(self, request, chat_id, agent_id):
        from hub.errors import NotFound

        chat = own_chat(request, chat_id)
        member = next((a for a in selectors.members_of(chat=chat) if str(a.pk) == str(agent_id)), None)
        if member is None:
            raise NotFound("no such member")
        services.remove_member(chat=chat, agent=member)
        return Response(status=204)
