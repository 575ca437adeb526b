"""Reads whose SQL is built once per process: for the queries every API request runs.

Django compiles a queryset to SQL each time it is evaluated. For the reads of
an API submission (the token, the team's tiers, the nodes, the teams and their
quotas) that took 0.3-0.7 ms of CPU a query, several times what PostgreSQL
spends running the prepared statement. A `CompiledQuery` compiles its queryset
once, with marker values where the call's values go, and each call sends the
same SQL with its own values (so psycopg keeps preparing it on the server).

Only the SQL is kept: every call reads fresh rows. Rows come back as tuples,
through the converters the queryset would have applied; `columns` and
`instance` turn the columns of a model (also through a relation, as
select_related would) back into the model instance the ORM would build.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Model, QuerySet


class CompiledQuery:
    """`build(*markers)` returns a values_list() queryset; calling this runs its SQL with other values.

    Each marker must reach the SQL's parameters exactly once, unchanged (an
    equality filter on a field of the marker's type): compiling fails loudly
    otherwise, rather than sending a value to the wrong place.
    """

    def __init__(self, build: Callable[..., QuerySet], *markers):
        self._build = build
        self._markers = markers
        self._compiled: dict[tuple[str, str], tuple] = {}  # (alias, vendor) -> (sql, params, slots, converters)

    def __call__(self, *values, using: str = DEFAULT_DB_ALIAS) -> list[tuple]:
        connection = connections[using]
        compiled = self._compiled.get((using, connection.vendor))
        if compiled is None:
            compiled = self._compiled[(using, connection.vendor)] = self._compile(using)
        sql, params, slots, (compiler, converters, width) = compiled
        params = list(params)
        for slot, value in zip(slots, values, strict=True):
            params[slot] = value
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        if width is not None:
            rows = [row[:width] for row in rows]
        if converters:
            rows = [tuple(row) for row in compiler.apply_converters(rows, converters)]
        return rows

    def _compile(self, using: str) -> tuple:
        queryset = self._build(*self._markers)
        compiler = queryset.query.get_compiler(using=using)
        sql, params = compiler.as_sql()
        slots = []
        for marker in self._markers:
            # isinstance: psycopg wraps the value of some integer fields (Int4 for a PositiveIntegerField).
            found = [index for index, param in enumerate(params) if isinstance(param, type(marker)) and param == marker]
            if len(found) != 1:
                raise ValueError(f"Marker {marker!r} appears {len(found)} times in the parameters of: {sql}")
            slots.append(found[0])
        converters = compiler.get_converters([column for column, _, _ in compiler.select[: compiler.col_count]])
        width = compiler.col_count if compiler.has_extra_select else None
        return sql, tuple(params), slots, (compiler, converters, width)


def columns(model: type[Model], through: str = "") -> list[str]:
    """values_list() names of every column of `model`, in its field order; `through` a relation's name."""
    prefix = f"{through}__" if through else ""
    return [prefix + field.attname for field in model._meta.concrete_fields]


def instance(model: type[Model], values: Sequence, using: str = DEFAULT_DB_ALIAS) -> Model | None:
    """The instance the ORM builds from `model`'s columns (as `columns` lists them); None for a missing row."""
    pk_index = model._meta.concrete_fields.index(model._meta.pk)
    if values[pk_index] is None:  # an outer join found no row
        return None
    return model.from_db(using, [field.attname for field in model._meta.concrete_fields], list(values))
