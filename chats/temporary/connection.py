"""The database connection of one temporary chat: SQLite in memory, kept in step with its image.

Before a read it loads the newest image if another process stored one. A transaction holds the
chat's lock from its BEGIN to its end, starts from the newest image and, if it changed anything,
stores the next version as it commits (before the commit's on_commit actions run, so whoever
hears an event finds the rows). A statement outside a transaction is its own transaction: a
write takes the lock for that statement, a read does not.
"""

import contextlib

from django.db import OperationalError
from django.db.backends.sqlite3 import base as sqlite3

from chats.temporary.images import ChatBusy, LostLock, images

SETTINGS = {
    "ENGINE": "django.db.backends.sqlite3",
    "NAME": ":memory:",
    "ATOMIC_REQUESTS": False,
    "AUTOCOMMIT": True,
    "CONN_MAX_AGE": None,
    "CONN_HEALTH_CHECKS": False,
    # No cache of prepared statements: one prepared before the database was replaced by a newer
    # image aborts when run again ("abort due to ROLLBACK").
    "OPTIONS": {"cached_statements": 0},
    "TIME_ZONE": None,
    "USER": "",
    "PASSWORD": "",
    "HOST": "",
    "PORT": "",
    "TEST": {"CHARSET": None, "COLLATION": None, "MIGRATE": False, "MIRROR": None, "NAME": None},
}


class ImageWriteFailed(OperationalError):
    """The chat's lock could not be taken, or was lost before the image was stored."""


class ImageCursor(sqlite3.SQLiteCursorWrapper):
    image_connection = None

    def execute(self, query, params=None):
        with self.image_connection.statement(query):
            return super().execute(query, params)

    def executemany(self, query, param_list):
        with self.image_connection.statement(query):
            return super().executemany(query, param_list)


def _is_read(query: str) -> bool:
    return query.lstrip()[:6].upper() in ("SELECT", "PRAGMA")


class DatabaseWrapper(sqlite3.DatabaseWrapper):
    """Django's SQLite connection over one temporary chat's image. Its alias is `default`: inside
    chats.temporary.scope.inside() it stands in for the hub's database."""

    def __init__(self, chat_key: str):
        super().__init__(dict(SETTINGS), alias="default")
        self.chat_key = chat_key
        self.image_version = None
        self._token = None
        self._changes_at_start = 0

    def get_new_connection(self, conn_params):
        connection = super().get_new_connection(conn_params)
        # The image holds copies of only some of the rows a chat's rows refer to (mirror.py).
        connection.execute("PRAGMA foreign_keys = OFF")
        self.image_version = None
        return connection

    def create_cursor(self, name=None):
        cursor = self.connection.cursor(factory=ImageCursor)
        cursor.image_connection = self
        return cursor

    def load_newest(self) -> None:
        """Replace this connection's database with the stored image if that is newer.
        Raises images.ChatGone when the chat expired or was deleted."""
        self.ensure_connection()
        store = images()
        if self.image_version is not None and store.version(self.chat_key) == self.image_version:
            return
        version, image = store.load(self.chat_key)
        self.connection.deserialize(image)
        self.image_version = version

    def _hold(self) -> None:
        try:
            self._token = images().acquire(self.chat_key)
        except ChatBusy as error:
            raise ImageWriteFailed(f"temporary chat {self.chat_key} is busy") from error
        try:
            self.load_newest()
        except BaseException:
            self._let_go()
            raise
        self._changes_at_start = self.connection.total_changes

    def _let_go(self) -> None:
        token, self._token = self._token, None
        if token is not None:
            images().release(self.chat_key, token)

    def _store_if_changed(self) -> None:
        if self.connection.total_changes == self._changes_at_start:
            return
        try:
            self.image_version = images().store(
                self.chat_key, token=self._token, expected=self.image_version, image=self.connection.serialize()
            )
        except LostLock as error:
            self.image_version = None  # what this connection holds was not stored: load again
            raise ImageWriteFailed(f"temporary chat {self.chat_key} changed while it was written") from error

    @contextlib.contextmanager
    def statement(self, query: str):
        """Around one statement: nothing more inside a transaction, else one of its own."""
        if self._token is not None:
            yield
        elif _is_read(query):
            self.load_newest()
            yield
        else:
            self._hold()
            try:
                yield
                self._store_if_changed()
            finally:
                self._let_go()

    def _start_transaction_under_autocommit(self):
        self._hold()
        try:
            super()._start_transaction_under_autocommit()
        except BaseException:
            self._let_go()
            raise

    def _commit(self):
        if self._token is None:
            return super()._commit()
        try:
            super()._commit()
            self._store_if_changed()
        except BaseException:
            self.image_version = None
            raise
        finally:
            self._let_go()

    def _rollback(self):
        try:
            super()._rollback()
        finally:
            self._let_go()
