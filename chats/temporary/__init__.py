"""Temporary chats: chats that never touch the database.

A temporary chat is a small SQLite database of its own, an *image*, kept in Redis (in process
memory when the hub is embedded) and expiring `HUB_TEMPORARY_HOURS` after its last write. It has
the same tables as the hub's database, so the same services and selectors run on it unchanged:
inside `scope.inside(chat_id)`, Django's default connection is the image's (backend.DatabaseWrapper),
which loads the newest image before it reads and stores a new one when a transaction commits,
holding the chat's lock from the transaction's start to its end. Every web and worker process sees
the same chat; nothing of it reaches PostgreSQL or the SQLite file.

The image also holds a copy of what the chat's rows refer to (mirror.py): its owner (without the
password) and the agents and remotes the owner may use, so the ORM's joins work.
Secrets (remote headers, provider keys) are not copied.

docs/decisions.md ("Temporary chats are SQLite images") says why, and what else was weighed.
"""
