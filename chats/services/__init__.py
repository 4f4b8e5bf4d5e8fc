"""Every write to conversations. Each service runs in one transaction and broadcasts after commit.

One module per concern; import from here: `from chats import services; services.send_message(...)`.
"""

from chats.services.attachments import delete_file, read_file_text, remove_unsent_file, upload_file
from chats.services.chats import (
    add_member,
    create_chat,
    default_title,
    delete_chat,
    members_payload,
    plain_text,
    preview_of,
    purge_chat,
    purge_expired_chats,
    remove_member,
    restore_chat,
    touch_chat,
    update_chat,
)
from chats.services.copies import export_chat, export_markdown, fork_chat, import_chat
from chats.services.messages import edit_message, rate_reply, resubmit_message, send_message
from chats.services.organize import (
    archive_chat,
    archive_idle_chats,
    branch_chat,
    create_folder,
    delete_folder,
    delete_tag,
    move_chat,
    organize_chat,
    pin_chat,
    tag_chat,
    untag_chat,
    update_folder,
)
from chats.services.replies import refuse_reply, resume_reply, save_reply_progress, settle_reply, start_reply
from chats.services.shares import revoke_share, share_chat
from chats.services.temporary import expire_temporary_chats, save_chat

__all__ = [
    "archive_chat", "archive_idle_chats", "branch_chat", "create_folder", "delete_folder", "delete_tag", "move_chat",
    "organize_chat", "pin_chat", "tag_chat", "untag_chat", "update_folder",
    "add_member", "create_chat", "default_title", "delete_chat", "delete_file", "edit_message", "rate_reply",
    "resubmit_message",
    "expire_temporary_chats", "export_chat", "export_markdown", "fork_chat", "import_chat", "members_payload",
    "plain_text", "preview_of", "purge_chat", "purge_expired_chats", "read_file_text", "remove_member",
    "remove_unsent_file",
    "refuse_reply", "restore_chat", "resume_reply", "save_chat", "save_reply_progress", "send_message", "settle_reply",
    "revoke_share", "share_chat",
    "start_reply", "touch_chat", "update_chat", "upload_file",
]
