"""Daphne's runserver, imported only when the command runs (hub/devserver/__init__.py)."""

from daphne.management.commands.runserver import Command  # noqa: F401
