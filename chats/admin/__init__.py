"""The admin of conversations: a chat with its threads, members, latest messages and runs.

Messages, threads and memory are read-only rows; actions (restore, purge, move to the trash,
settle a stuck reply, remove a member, forget a memory entry, revoke a share link) call services and record a
LogEntry.
"""

from chats.admin import chats, files, memory, messages, organize, shares, transfers  # noqa: F401  (each registers its models)
