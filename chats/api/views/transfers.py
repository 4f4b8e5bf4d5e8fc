"""Imports and exports as jobs: start one (an import uploads its file; an export names what to
take out), list them, follow one's progress, download an export's file, forget a finished one."""

from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response

from chats import events, selectors
from chats.attachments.uploads import refused_upload
from chats.models import Transfer
from chats.transfers import jobs
from chats.transfers import selectors as transfer_selectors
from hub.api.parsers import LimitedJSONParser
from hub.api.views import ApiView, valid
from hub.errors import NotFound

TRANSFER_ID = OpenApiParameter("transfer_id", OpenApiTypes.UUID, OpenApiParameter.PATH)


class TransferIn(serializers.Serializer):
    kind = serializers.ChoiceField(Transfer.Kind.values, help_text="import (with `file`) or export")
    format = serializers.CharField(
        required=False, default="auto",
        help_text="import: auto, hub, chatgpt or claude; export: hub (JSON with files) or markdown")
    file = serializers.FileField(required=False, help_text="import: the .json or .zip export")
    chat_id = serializers.UUIDField(required=False, help_text="export: one chat")
    folder_id = serializers.IntegerField(required=False, help_text="export: a folder's chats")


class TransferListQuery(serializers.Serializer):
    limit = serializers.IntegerField(min_value=1, max_value=100, default=transfer_selectors.RECENT)
    before = serializers.DateTimeField(required=False, help_text="next_cursor of the page before")


class SkipOut(serializers.Serializer):
    entry = serializers.IntegerField(help_text="The conversation's place in the file, from 1.")
    title = serializers.CharField(allow_blank=True)
    reason = serializers.CharField()


class ReportOut(serializers.Serializer):
    imported = serializers.IntegerField(required=False)
    skipped = serializers.IntegerField(required=False)
    skips = SkipOut(many=True, required=False, help_text="The first 100 skipped entries.")
    first_skip = serializers.CharField(required=False, help_text='e.g. conversation 17 ("Trip plan"): ...')
    chats = serializers.ListField(child=serializers.DictField(), required=False,
                                  help_text="The first 100 imported chats: id and title.")
    exported = serializers.IntegerField(required=False)
    size = serializers.IntegerField(required=False, help_text="The export file's bytes.")


class TransferOut(serializers.Serializer):
    id = serializers.UUIDField()
    kind = serializers.ChoiceField(Transfer.Kind.values)
    format = serializers.CharField()
    scope = serializers.DictField(help_text='export: {"chat": id}, {"folder": id} or {} for every chat')
    status = serializers.ChoiceField(Transfer.Status.values)
    name = serializers.CharField(allow_blank=True, help_text="The uploaded file's name, or the export's file name.")
    total = serializers.IntegerField()
    done = serializers.IntegerField()
    report = ReportOut()
    error = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    download_url = serializers.CharField(allow_null=True, help_text="A finished export's file.")
    expires_at = serializers.DateTimeField(
        allow_null=True, help_text="When a finished export's file is deleted (HUB_EXPORT_KEEP_DAYS after the export)."
    )


class TransferPageOut(serializers.Serializer):
    results = TransferOut(many=True)
    next_cursor = serializers.DateTimeField(allow_null=True)


def own_transfer(request, transfer_id) -> Transfer:
    return transfer_selectors.transfer_for_user(user=request.user, transfer_id=transfer_id)


class TransferListView(ApiView):
    parser_classes = [MultiPartParser, LimitedJSONParser]
    max_upload_setting = "HUB_MAX_IMPORT_MB"

    @extend_schema(operation_id="transfers_list", tags=["transfers"], parameters=[TransferListQuery],
                   responses=TransferPageOut, summary="Your imports and exports, newest first")
    def get(self, request):
        query = valid(TransferListQuery, request.query_params)
        page = transfer_selectors.recent_transfers(user=request.user, limit=query["limit"], before=query.get("before"))
        cursor = events.iso(page[-1].created_at) if len(page) == query["limit"] else None
        return Response({"results": [events.transfer_payload(t) for t in page], "next_cursor": cursor})

    @extend_schema(
        operation_id="transfers_create", tags=["transfers"],
        request={"multipart/form-data": TransferIn, "application/json": TransferIn},
        responses={201: TransferOut},
        summary="Start an import (multipart: kind=import, format, file) or an export (kind=export, format, "
                "chat_id or folder_id or neither for every chat)",
        description="The job runs in the background: follow it with transfers_retrieve or the transfer.updated "
                    "event. A file over HUB_MAX_IMPORT_MB is a 413 `too_large`; a file that is neither JSON nor "
                    "a zip is a 400 naming `file`.")
    def post(self, request):
        data = valid(TransferIn, request.data)
        if refused := refused_upload(request._request):
            raise refused
        if data["kind"] == Transfer.Kind.IMPORT:
            transfer = jobs.start_import(owner=request.user, upload=data.get("file"), format=data["format"])
        else:
            scope = _export_scope(request, data)
            transfer = jobs.start_export(owner=request.user, format=_export_format(data), **scope)
        return Response(events.transfer_payload(transfer), status=201)


def _export_format(data: dict) -> str:
    return "hub" if data["format"] in ("auto", "json") else data["format"]


def _export_scope(request, data: dict) -> dict:
    """One chat or one folder of the user's (another user's is 404), or neither: every chat."""
    if data.get("chat_id"):
        return {"chat": selectors.chat_for_user(user=request.user, chat_id=data["chat_id"])}
    if data.get("folder_id") is not None:
        return {"folder": transfer_selectors.folder_for_user(user=request.user, folder_id=data["folder_id"])}
    return {}


class TransferDetailView(ApiView):
    @extend_schema(operation_id="transfers_retrieve", tags=["transfers"], parameters=[TRANSFER_ID],
                   responses=TransferOut, summary="One import or export: its progress, report or error")
    def get(self, request, transfer_id):
        return Response(events.transfer_payload(own_transfer(request, transfer_id)))

    @extend_schema(operation_id="transfers_destroy", tags=["transfers"], parameters=[TRANSFER_ID],
                   responses={204: None}, summary="Forget a finished import or export (imported chats stay)")
    def delete(self, request, transfer_id):
        jobs.delete_transfer(transfer=own_transfer(request, transfer_id))
        return Response(status=204)


class TransferDownloadView(ApiView):
    @extend_schema(operation_id="transfers_download", tags=["transfers"], parameters=[TRANSFER_ID],
                   responses={(200, "application/octet-stream"): OpenApiResponse(OpenApiTypes.BINARY)},
                   summary="A finished export's file (.json, .md, or .zip for many chats)")
    def get(self, request, transfer_id):
        transfer = own_transfer(request, transfer_id)
        if events.transfer_payload(transfer)["download_url"] is None:
            raise NotFound("this job has no file to download (yet)")
        response = FileResponse(transfer.file.open("rb"), as_attachment=True, filename=transfer.name,
                                content_type="application/octet-stream")
        response["X-Content-Type-Options"] = "nosniff"
        response["Content-Security-Policy"] = "default-src 'none'; sandbox"
        response["Cache-Control"] = "private, no-store"
        return response
