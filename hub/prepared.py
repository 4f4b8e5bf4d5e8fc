"""Reads whose SQL is built once per process, then run with new values.

Building a query's SQL is most of what the ORM costs: reading one run with its agent, chat and
thread by its id spends two thirds of its Python calls compiling the same SQL it compiled for the
previous turn. A prepared read compiles its queryset once per database (the first time it runs,
so inside the caller's transaction when it locks), remembers where each value goes, and from then
on runs the SQL with the new values and makes the model instances as the queryset would, with
their select_related objects.

Only what the hot paths need: equality filters on fields named up front (or reached through
relations), whose values are ids (integers or UUIDs); a None value is `IS NULL`, a plan of its
own. No annotations, no prefetches.
"""

import uuid

from django.db import connections
from django.db.models import UUIDField
from django.db.models.query import get_related_populators


class PreparedRead:
    """rows = PreparedRead(lambda: Message.objects.order_by("id"), "chat", "thread").fetch(chat=1, thread=None)"""

    def __init__(self, queryset_factory, *fields: str):
        self.queryset_factory = queryset_factory  # a callable: apps may not be ready at import
        self.fields = fields
        self._plans: dict[tuple, _Plan] = {}
        self._model_and_alias = None

    def fetch(self, **values) -> list:
        """The model instances the queryset filtered on these values would give, in its order."""
        if self._model_and_alias is None:
            queryset = self.queryset_factory()
            self._model_and_alias = queryset.model, queryset.db  # the database a router picks for it
        connection = connections[self._model_and_alias[1]]
        nulls = tuple(name for name in self.fields if values[name] is None)
        # A temporary chat's image stands in for the default connection (chats.temporary.scope):
        # the backend is part of the key, as the SQL is the backend's own.
        key = (connection.alias, type(connection), nulls)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = _Plan(self, connection, nulls)
        return plan.run(connection, values)

    def get(self, **values):
        """The one instance, or the model's DoesNotExist."""
        rows = self.fetch(**values)
        if not rows:
            raise self._model_and_alias[0].DoesNotExist
        return rows[0]


class _Plan:
    """One compiled form of a prepared read: its SQL, where each value goes, and how rows become
    instances (what django.db.models.query.ModelIterable works out at every query)."""

    def __init__(self, read: PreparedRead, connection, nulls: tuple):
        queryset = read.queryset_factory()
        meta = queryset.model._meta
        self.targets = {name: _target_field(meta, name) for name in read.fields}
        stand_ins = {name: _stand_in(field, i) for i, (name, field) in enumerate(self.targets.items())}
        queryset = queryset.filter(**{name: None if name in nulls else stand_ins[name] for name in read.fields})
        compiler = queryset.query.get_compiler(connection=connection)
        self.sql, params = compiler.as_sql()
        if compiler.annotation_col_map or queryset._prefetch_related_lookups or queryset._known_related_objects:
            raise ValueError("a prepared read takes plain model rows only")
        self.params = list(params)
        self.slots = {}
        for name in read.fields:
            if name in nulls:
                continue
            stand_in = self.targets[name].get_db_prep_value(stand_ins[name], connection)
            slots = [i for i, param in enumerate(self.params) if param == stand_in]
            if len(slots) != 1:
                raise ValueError(f"cannot place {name} in {self.sql}")
            self.slots[name] = slots[0]
        select, klass_info = compiler.select, compiler.klass_info
        self.model = klass_info["model"]
        start, end = klass_info["select_fields"][0], klass_info["select_fields"][-1] + 1
        self.own_columns = slice(start, end)
        self.init_list = [column[0].target.attname for column in select[start:end]]
        self.populators = get_related_populators(klass_info, select, connection.alias)
        # The converters (JSON, and on SQLite dates, UUIDs and booleans) depend on the backend,
        # not on the connection object: a backend's own are bound again to the connection running
        # each read, so a plan keeps no connection of the thread that built it alive.
        self.converters = [
            (position, [_unbound(converter, connection.ops) for converter in converters], expression)
            for position, (converters, expression) in compiler.get_converters([c[0] for c in select]).items()
        ]

    def run(self, connection, values: dict) -> list:
        params = list(self.params)
        for name, slot in self.slots.items():
            params[slot] = self.targets[name].get_db_prep_value(values[name], connection)
        with connection.cursor() as cursor:
            cursor.execute(self.sql, params)
            rows = cursor.fetchall()
        return [self._instance(connection, row) for row in rows]

    def _instance(self, connection, row):
        if self.converters:
            row = list(row)
            for position, converters, expression in self.converters:
                value = row[position]
                for converter, of_backend in converters:
                    if of_backend:
                        value = converter(connection.ops, value, expression, connection)
                    else:
                        value = converter(value, expression, connection)
                row[position] = value
        instance = self.model.from_db(connection.alias, self.init_list, row[self.own_columns])
        for populator in self.populators:
            populator.populate(row, instance)
        return instance


def _unbound(converter, ops) -> tuple:
    """(function, True) for a converter of the backend's operations, else (converter, False)."""
    if getattr(converter, "__self__", None) is ops:
        return converter.__func__, True
    return converter, False


def _target_field(meta, name: str):
    """The column a filter on `name` compares: a field, the primary key or a foreign key's target,
    of the model or of one its relations reach ("memberships__chat")."""
    *path, last = name.split("__")
    for step in path:
        meta = meta.get_field(step).related_model._meta
    field = meta.pk if last == "pk" else meta.get_field(last)
    return field.target_field if field.is_relation else field


def _stand_in(field, index: int):
    """A value no row has, to find in the compiled parameters where the real one goes."""
    if isinstance(field, UUIDField):
        return uuid.UUID(int=0xC0FFEE_0000 + index)
    return -1_987_654_321 - index
