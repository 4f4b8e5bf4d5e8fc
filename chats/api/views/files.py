"""Files: upload into a chat (multipart), list a chat's files, read, download or delete one."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response

from chats import selectors, services
from chats.api import serializers as s
from chats.api.views.chats import CHAT_ID, own_chat
from chats.attachments import files
from chats.views.files import file_response, storage_payload, store_uploads
from hub.api.views import ApiView

FILE_ID = OpenApiParameter("file_id", OpenApiTypes.UUID, OpenApiParameter.PATH)


class ChatFileListView(ApiView):
    parser_classes = [MultiPartParser]

    @extend_schema(operation_id="files_list", tags=["files"], parameters=[CHAT_ID], responses=s.FileListOut,
                   summary="The chat's files, oldest first, and what your files take of your room")
    def get(self, request, chat_id):
        chat = own_chat(request, chat_id)
        return Response({"results": [files.file_payload(a) for a in selectors.chat_files(chat=chat)],
                         "storage": storage_payload(request.user)})

    @extend_schema(operation_id="files_create", tags=["files"], parameters=[CHAT_ID],
                   request={"multipart/form-data": s.FileUploadIn}, responses={201: s.FileListOut},
                   summary="Upload files into a chat; send a message with their ids in `files` to attach them",
                   description="A file over HUB_MAX_UPLOAD_MB, or over your room (HUB_USER_STORAGE_MB), is a 413 "
                               "`too_large` naming the limit; nothing of the upload is kept then.")
    def post(self, request, chat_id):
        chat = own_chat(request, chat_id)  # another user's chat is 404 before the body is looked at
        request.FILES  # noqa: B018  (DRF parses the body here; the upload handler marks a refusal)
        stored = store_uploads(request._request, chat)
        return Response({"results": [files.file_payload(a) for a in stored], "storage": storage_payload(request.user)},
                        status=201)


class FileDetailView(ApiView):
    @extend_schema(operation_id="files_retrieve", tags=["files"], parameters=[FILE_ID], responses=s.FileOut)
    def get(self, request, file_id):
        return Response(files.file_payload(selectors.file_for_user(user=request.user, file_id=file_id)))

    @extend_schema(operation_id="files_destroy", tags=["files"], parameters=[FILE_ID], responses={204: None},
                   summary="Delete a file not yet sent with a message")
    def delete(self, request, file_id):
        services.remove_unsent_file(attachment=selectors.file_for_user(user=request.user, file_id=file_id))
        return Response(status=204)


class FileContentView(ApiView):
    @extend_schema(operation_id="files_content", tags=["files"], parameters=[FILE_ID],
                   responses={(200, "application/octet-stream"): OpenApiResponse(OpenApiTypes.BINARY)},
                   summary="The file's bytes, as an attachment download")
    def get(self, request, file_id):
        return file_response(selectors.file_for_user(user=request.user, file_id=file_id), inline=False)
