"""Shared pieces of the REST API (/api/v1/): authentication, errors, parsing limits, throttling,
the OpenAPI helpers and Server-Sent Events. The endpoints live in chats/api and agents_app/api."""
