"""Files attached to chats: what they are, reading their text, and their passages."""
