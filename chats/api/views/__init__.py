"""API views of conversations, one module per concern."""
