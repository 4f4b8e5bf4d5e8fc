"""The pages and the chat page's JSON endpoints (a package: pages, page state, JSON)."""

from chats.views.chat_json import (
    chat_delete,
    chat_messages,
    chat_restore,
    chat_save,
    chat_state,
    chat_threads,
    chat_update,
    directory,
    member_add,
    member_remove,
    message_feedback,
    message_regenerate,
    message_resubmit,
    message_search,
    remote_attach,
)
from chats.views.files import file_download, file_remove, file_upload
from chats.views.organize import (
    chat_organize,
    chat_tag_add,
    chat_tag_remove,
    folder_delete,
    folder_update,
    folders,
    message_branch,
)
from chats.views.pages import (
    chat_create,
    chat_detail,
    chat_list,
    memory_entry_delete,
    memory_page,
    not_found,
    signup,
)
from chats.views.shares import chat_shares, share_revoke, shared_chat, shared_links
from chats.views.transfers import transfers_page

__all__ = [
    "transfers_page",
    "chat_shares", "share_revoke", "shared_chat", "shared_links",
    "chat_organize", "chat_tag_add", "chat_tag_remove", "folder_delete", "folder_update", "folders", "message_branch",
    "file_download", "file_remove", "file_upload",
    "chat_create", "chat_delete", "chat_detail", "chat_list", "chat_messages", "chat_restore", "chat_save",
    "chat_state", "chat_threads", "chat_update", "directory", "member_add", "member_remove", "memory_entry_delete",
    "memory_page", "message_feedback", "message_regenerate", "message_resubmit", "message_search", "not_found",
    "remote_attach", "signup",
]
