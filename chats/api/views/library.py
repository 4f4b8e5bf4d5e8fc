"""Shared memory blocks, the shared documents index, and search."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers as drf
from rest_framework.response import Response

from chats import events, memory, search
from hub.api.views import ApiView, valid

LABEL = OpenApiParameter("label", OpenApiTypes.STR, OpenApiParameter.PATH)


def block_payload(block) -> dict:
    return {
        "id": block.pk, "label": block.label, "description": block.description, "max_tokens": block.max_tokens,
        "content": block.content, "version": block.version, "updated_at": events.iso(block.updated_at),
        "entries": [{"id": e.pk, "content": e.content, "chat_id": str(e.chat_id) if e.chat_id else None,
                     "agent_id": e.agent_id, "created_at": events.iso(e.created_at)} for e in block.entries.all()],
    }


def document_payload(document) -> dict:
    return {"id": document.pk, "label": document.label, "key": document.key, "content": document.content,
            "updated_at": events.iso(document.updated_at)}


class EntryOut(drf.Serializer):
    id = drf.IntegerField()
    content = drf.CharField()
    chat_id = drf.UUIDField(allow_null=True, help_text="The chat it came from")
    agent_id = drf.IntegerField(allow_null=True, help_text="The agent that wrote it (none: you)")
    created_at = drf.DateTimeField()


class BlockOut(drf.Serializer):
    id = drf.IntegerField()
    label = drf.CharField()
    description = drf.CharField(allow_blank=True)
    max_tokens = drf.IntegerField()
    content = drf.CharField(allow_blank=True)
    version = drf.IntegerField()
    updated_at = drf.DateTimeField()
    entries = EntryOut(many=True)


class BlockListOut(drf.Serializer):
    results = BlockOut(many=True)


class BlockSet(drf.Serializer):
    content = drf.CharField(allow_blank=True, max_length=memory.MAX_BLOCK_CHARS, trim_whitespace=False,
                            help_text="The whole new content; empty empties the block")
    description = drf.CharField(required=False, allow_blank=True, max_length=500)
    max_tokens = drf.IntegerField(required=False, min_value=1, max_value=100_000)


class BlockAppend(drf.Serializer):
    text = drf.CharField(max_length=memory.MAX_BLOCK_CHARS)


class MemoryListView(ApiView):
    @extend_schema(operation_id="memory_list", tags=["memory"], responses=BlockListOut,
                   summary="Your shared memory: every block with its entries")
    def get(self, request):
        return Response({"results": [block_payload(b) for b in memory.blocks_with_entries(owner=request.user)]})


class MemoryBlockView(ApiView):
    @extend_schema(operation_id="memory_retrieve", tags=["memory"], parameters=[LABEL], responses=BlockOut)
    def get(self, request, label):
        return Response(block_payload(memory.block_with_entries(owner=request.user, label=label)))

    @extend_schema(operation_id="memory_set", tags=["memory"], parameters=[LABEL], request=BlockSet,
                   responses=BlockOut, summary="Replace a block's content (made if new; last writer wins)")
    def put(self, request, label):
        block = memory.set_content(owner=request.user, label=label, **valid(BlockSet, request.data))
        return Response(block_payload(memory.block_with_entries(owner=request.user, label=block.label)))


class MemoryAppendView(ApiView):
    @extend_schema(operation_id="memory_append", tags=["memory"], parameters=[LABEL], request=BlockAppend,
                   responses=BlockOut, summary="Add an entry to a block (made if new); concurrent appends all land")
    def post(self, request, label):
        block = memory.append(owner=request.user, label=label, text=valid(BlockAppend, request.data)["text"])
        return Response(block_payload(memory.block_with_entries(owner=request.user, label=block.label)))


class MemoryEntryView(ApiView):
    @extend_schema(operation_id="memory_entry_destroy", tags=["memory"],
                   parameters=[OpenApiParameter("entry_id", OpenApiTypes.INT, OpenApiParameter.PATH)],
                   responses=BlockOut, summary="Forget one entry; answers the block as it is now")
    def delete(self, request, entry_id):
        block = memory.delete_entry(owner=request.user, entry_id=entry_id)
        return Response(block_payload(memory.block_with_entries(owner=request.user, label=block.label)))


class DocumentOut(drf.Serializer):
    id = drf.IntegerField()
    label = drf.CharField()
    key = drf.CharField()
    content = drf.CharField()
    updated_at = drf.DateTimeField()


class DocumentPageOut(drf.Serializer):
    results = DocumentOut(many=True)
    has_more = drf.BooleanField()


class DocumentQuery(drf.Serializer):
    label = drf.CharField(required=False, max_length=100)
    limit = drf.IntegerField(default=50, min_value=1, max_value=search.MAX_LIMIT)
    offset = drf.IntegerField(default=0, min_value=0, max_value=10_000_000)


class DocumentIn(drf.Serializer):
    label = drf.CharField(max_length=100)
    key = drf.CharField(max_length=300)
    content = drf.CharField(max_length=1_000_000, trim_whitespace=False)


class DocumentListView(ApiView):
    @extend_schema(operation_id="documents_list", tags=["documents"], parameters=[DocumentQuery],
                   responses=DocumentPageOut, summary="Your shared index, by label and key")
    def get(self, request):
        query = valid(DocumentQuery, request.query_params)
        rows = list(search.documents_for(owner=request.user, label=query.get("label"))
                    [query["offset"]:query["offset"] + query["limit"] + 1])
        return Response({"results": [document_payload(d) for d in rows[:query["limit"]]],
                         "has_more": len(rows) > query["limit"]})

    @extend_schema(operation_id="documents_put", tags=["documents"], request=DocumentIn, responses=DocumentOut,
                   summary="Index content under (label, key); the same key again replaces it")
    def post(self, request):
        return Response(document_payload(search.index_shared(owner=request.user, **valid(DocumentIn, request.data))))


class DocumentDetailView(ApiView):
    ID = OpenApiParameter("document_id", OpenApiTypes.INT, OpenApiParameter.PATH)

    @extend_schema(operation_id="documents_retrieve", tags=["documents"], parameters=[ID], responses=DocumentOut)
    def get(self, request, document_id):
        return Response(document_payload(search.document_for_user(owner=request.user, document_id=document_id)))

    @extend_schema(operation_id="documents_destroy", tags=["documents"], parameters=[ID], responses={204: None})
    def delete(self, request, document_id):
        search.delete_shared(document=search.document_for_user(owner=request.user, document_id=document_id))
        return Response(status=204)


class SearchQuery(drf.Serializer):
    q = drf.CharField(max_length=1000, help_text="Words; each must match (as a word prefix). Never syntax.")
    limit = drf.IntegerField(default=20, min_value=1, max_value=search.MAX_LIMIT)
    offset = drf.IntegerField(default=0, min_value=0, max_value=10_000)


class DocumentSearchQuery(SearchQuery):
    label = drf.CharField(max_length=100)
    offset = None


class HitOut(drf.Serializer):
    chat_id = drf.UUIDField()
    chat_title = drf.CharField()
    thread_id = drf.IntegerField(allow_null=True)
    message_id = drf.IntegerField(allow_null=True)
    snippet = drf.CharField(allow_blank=True, help_text="Matches marked [[like this]]")
    rank = drf.FloatField()
    created_at = drf.DateTimeField(allow_null=True, help_text="The message's time (null for a chat)")


class HitListOut(drf.Serializer):
    results = HitOut(many=True)


class DocumentHitOut(drf.Serializer):
    key = drf.CharField()
    snippet = drf.CharField(allow_blank=True)
    rank = drf.FloatField()


class DocumentHitListOut(drf.Serializer):
    results = DocumentHitOut(many=True)


class SearchMessagesView(ApiView):
    @extend_schema(operation_id="search_messages", tags=["search"], parameters=[SearchQuery], responses=HitListOut,
                   summary="Messages and notes across all your live chats, best first")
    def get(self, request):
        query = valid(SearchQuery, request.query_params)
        hits = search.search_messages(owner=request.user, query=query["q"], limit=query["limit"],
                                      offset=query["offset"])
        return Response({"results": [h.as_dict() for h in hits]})


class SearchChatsView(ApiView):
    @extend_schema(operation_id="search_chats", tags=["search"], parameters=[SearchQuery], responses=HitListOut,
                   summary="Your live chats whose title or description matches, best first")
    def get(self, request):
        query = valid(SearchQuery, request.query_params)
        hits = search.search_chats(owner=request.user, query=query["q"], limit=query["limit"], offset=query["offset"])
        return Response({"results": [h.as_dict() for h in hits]})


class SearchDocumentsView(ApiView):
    @extend_schema(operation_id="search_documents", tags=["search"], parameters=[DocumentSearchQuery],
                   responses=DocumentHitListOut, summary="Your shared index under one label, best first")
    def get(self, request):
        query = valid(DocumentSearchQuery, request.query_params)
        hits = search.search_shared(owner=request.user, label=query["label"], query=query["q"], limit=query["limit"])
        return Response({"results": hits})
