"""The REST API of conversations: chats, threads, messages, members, memory, documents, search."""
