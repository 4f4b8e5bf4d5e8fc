"""Refusing a file over HUB_MAX_UPLOAD_MB while it arrives, not after it was written whole.

Django parses a multipart body before any view runs (the CSRF check reads the form), through
the FILE_UPLOAD_HANDLERS in order. This one comes first: it passes each chunk on to Django's
handlers (memory for a small file, a temporary file otherwise) and stops the upload once a file
passes the limit. Django then reads the rest of the body without keeping it, and the upload
view answers 413 from what this handler left on the request. A view may allow larger files
(an import: HUB_MAX_IMPORT_MB) with a `max_upload_setting` naming the setting in MB.
"""

from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler, StopUpload

from chats.attachments import files
from hub.errors import TooLarge


class SizeLimitedUploadHandler(FileUploadHandler):
    def receive_data_chunk(self, raw_data, start):
        limit = upload_limit(self.request)
        if start + len(raw_data) > limit:
            name = files.clean_name(self.file_name)
            self.request.hub_upload_refused = TooLarge(
                f"{name} is larger than {files.megabytes(limit)}, the most a file may be.",
                fields={"file": [f"at most {files.megabytes(limit)}"]})
            raise StopUpload(connection_reset=False)
        return raw_data

    def file_complete(self, file_size):
        return None  # the next handler makes the file


def upload_limit(request) -> int:
    """The most one file may be in this request: the view's max_upload_setting, else
    HUB_MAX_UPLOAD_MB (the URL is resolved before any middleware reads the body)."""
    match = getattr(request, "resolver_match", None)
    view = match and (getattr(match.func, "view_class", None) or match.func)
    setting = getattr(view, "max_upload_setting", None)
    return int(getattr(settings, setting) * files.MB) if setting else files.max_upload_bytes()


def refused_upload(request) -> TooLarge | None:
    """What SizeLimitedUploadHandler refused in this request's body, if anything (read the files
    first)."""
    return getattr(request, "hub_upload_refused", None)
