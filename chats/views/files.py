"""Files of the chat page: upload into a chat, take an unsent one off, download.

A download goes only to the file's owner. Raster images (chats.attachments.files.shown_inline)
may be shown inline; everything else is an attachment download, and nothing is ever served as
HTML or SVG. Each answer forbids sniffing and runs nothing (a sandboxing CSP of its own).
"""

from django.http import FileResponse, JsonResponse
from django.views.decorators.http import require_GET, require_POST

from chats import selectors, services
from chats.attachments import files
from chats.attachments.uploads import refused_upload
from chats.views.chat_json import _chat, hub_json
from hub.errors import InvalidInput


@require_POST
@hub_json
def file_upload(request, chat_id):
    """Store the files of a multipart upload (field `file`, one or several) in the chat; answers
    with each file and what the user's files now take of their room."""
    stored = store_uploads(request, _chat(request, chat_id))
    return JsonResponse({"files": [files.file_payload(a) for a in stored], "storage": storage_payload(request.user)},
                        status=201)


def store_uploads(request, chat) -> list:
    """The files of a multipart upload (field `file`, one or several), stored in the chat; a
    refused upload (too large, none, too many) stores none of them."""
    uploads = request.FILES.getlist("file")
    if refused := refused_upload(request):
        raise refused
    if not uploads:
        raise InvalidInput.for_field("file", "choose a file to upload")
    if len(uploads) > files.FILES_PER_MESSAGE:
        raise InvalidInput.for_field("file", f"at most {files.FILES_PER_MESSAGE} files at once")
    return [services.upload_file(chat=chat, upload=upload) for upload in uploads]


@require_POST
@hub_json
def file_remove(request, file_id):
    """Take a file off the composer before it is sent: it is deleted."""
    services.remove_unsent_file(attachment=selectors.file_for_user(user=request.user, file_id=file_id))
    return JsonResponse({"storage": storage_payload(request.user)})


@require_GET
@hub_json
def file_download(request, file_id):
    attachment = selectors.file_for_user(user=request.user, file_id=file_id)
    return file_response(attachment, inline=request.GET.get("download") != "1")


def file_response(attachment, *, inline: bool) -> FileResponse:
    """The file's bytes from storage, streamed, with headers that keep a browser from running it."""
    inline = inline and files.shown_inline(attachment.content_type)
    response = FileResponse(attachment.file.open("rb"), as_attachment=not inline, filename=attachment.name,
                            content_type=files.served_type(attachment.content_type))
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; img-src 'self'; sandbox"
    response["Cache-Control"] = "private, max-age=3600"
    return response


def storage_payload(user) -> dict:
    return {"used": files.storage_used(user), "limit": files.user_storage_bytes(),
            "max_file": files.max_upload_bytes()}
