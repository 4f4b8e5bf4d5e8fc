"""Remotes (MCP tool servers) and the user's provider keys. Secrets go in, never come out: a
remote's header values and a key are never in an answer (a key shows its last four characters)."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers as drf
from rest_framework.response import Response

from agents_app import remotes, secrets
from agents_app.models import ProviderKey
from chats import events
from chats import selectors as chat_selectors
from chats.api.serializers import MessageOut
from hub.api.views import ApiView, valid
from hub.errors import InvalidInput, NotFound

REMOTE_ID = OpenApiParameter("remote_id", OpenApiTypes.INT, OpenApiParameter.PATH)
PROVIDER = OpenApiParameter("provider", OpenApiTypes.STR, OpenApiParameter.PATH, enum=ProviderKey.Provider.values)


def remote_payload(remote) -> dict:
    return {"id": remote.pk, "name": remote.name, "kind": remote.kind, "url": remote.url,
            "header_names": remotes.header_names(remote),
            "last_checked_at": events.iso(remote.last_checked_at), "status": remote.status}


def key_payload(key) -> dict:
    return {"provider": key.provider, "hint": key.hint, "created_at": events.iso(key.created_at)}


class RemoteOut(drf.Serializer):
    id = drf.IntegerField()
    name = drf.CharField()
    kind = drf.CharField()
    url = drf.CharField()
    header_names = drf.ListField(child=drf.CharField(), help_text="The values are secret and never shown")
    last_checked_at = drf.DateTimeField(allow_null=True)
    status = drf.CharField(allow_blank=True)


class RemoteListOut(drf.Serializer):
    results = RemoteOut(many=True)


class RemoteIn(drf.Serializer):
    name = drf.CharField(max_length=100)
    url = drf.CharField(max_length=200)
    headers = drf.DictField(child=drf.CharField(max_length=4000, allow_blank=True), required=False,
                            help_text="Sent to the server on every call (e.g. Authorization); secret")


class AttachIn(drf.Serializer):
    chat_id = drf.CharField(max_length=100)
    thread_id = drf.IntegerField(required=False, allow_null=True)
    new_thread_title = drf.CharField(required=False, max_length=200)


class AttachOut(drf.Serializer):
    message = MessageOut()


class KeyOut(drf.Serializer):
    provider = drf.ChoiceField(ProviderKey.Provider.values)
    hint = drf.CharField(help_text="The key's last four characters")
    created_at = drf.DateTimeField()


class KeyListOut(drf.Serializer):
    results = KeyOut(many=True)


class KeyIn(drf.Serializer):
    key = drf.CharField(max_length=1000)


class RemoteListView(ApiView):
    @extend_schema(operation_id="remotes_list", tags=["remotes"], responses=RemoteListOut)
    def get(self, request):
        return Response({"results": [remote_payload(r) for r in request.user.remotes.order_by("name", "id")]})

    @extend_schema(operation_id="remotes_create", tags=["remotes"], request=RemoteIn, responses={201: RemoteOut},
                   summary="Add an MCP tool server (attach it to a thread to give its agents the tools)")
    def post(self, request):
        remote = remotes.create_remote(owner=request.user, **valid(RemoteIn, request.data))
        return Response(remote_payload(remote), status=201)


class RemoteDetailView(ApiView):
    @extend_schema(operation_id="remotes_destroy", tags=["remotes"], parameters=[REMOTE_ID], responses={204: None})
    def delete(self, request, remote_id):
        remotes.delete_remote(remote=remotes.remote_for_user(user=request.user, remote_id=remote_id))
        return Response(status=204)


class RemoteAttachView(ApiView):
    @extend_schema(operation_id="remotes_attach", tags=["remotes"], parameters=[REMOTE_ID], request=AttachIn,
                   responses={201: AttachOut}, summary="Attach the remote to a chat's thread (a resource message)")
    def post(self, request, remote_id):
        remote = remotes.remote_for_user(user=request.user, remote_id=remote_id)
        data = valid(AttachIn, request.data)
        try:
            chat = chat_selectors.chat_for_user(user=request.user, chat_id=data["chat_id"])
        except NotFound:
            raise InvalidInput.for_field("chat_id", "no such chat") from None
        thread = None
        if data.get("thread_id") is not None:
            try:
                thread = chat_selectors.thread_for_chat(chat=chat, thread_id=data["thread_id"])
            except NotFound:
                raise InvalidInput.for_field("thread_id", "no such thread in this chat") from None
        message = remotes.attach_remote(chat=chat, remote=remote, thread=thread,
                                        new_thread_title=data.get("new_thread_title"))
        return Response({"message": events.message_payload(message)}, status=201)


class KeyListView(ApiView):
    @extend_schema(operation_id="provider_keys_list", tags=["provider keys"], responses=KeyListOut,
                   summary="Your own provider keys (only their last four characters)")
    def get(self, request):
        return Response({"results": [key_payload(k) for k in request.user.provider_keys.order_by("provider")]})


class KeyDetailView(ApiView):
    @extend_schema(operation_id="provider_keys_set", tags=["provider keys"], parameters=[PROVIDER], request=KeyIn,
                   responses=KeyOut, summary="Save or replace your key for a provider (stored encrypted)")
    def put(self, request, provider):
        key = secrets.store_key(owner=request.user, provider=provider, key=valid(KeyIn, request.data)["key"])
        return Response(key_payload(key))

    @extend_schema(operation_id="provider_keys_destroy", tags=["provider keys"], parameters=[PROVIDER],
                   responses={204: None})
    def delete(self, request, provider):
        if not secrets.delete_key(owner=request.user, provider=provider):
            raise NotFound("no such key")
        return Response(status=204)
